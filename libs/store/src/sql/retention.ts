/**
 * Retention statements (issue 15 item 3, seed D49). Each deletes at most `limit` rows, oldest
 * first, and reports what it deleted; the caller repeats it until a batch comes back short.
 * Rows another transaction holds locked are skipped (SKIP LOCKED), so two reconcilers pruning at
 * once share the work and never wait on a hot row.
 *
 * What each may touch, and why nothing else needs it:
 * - inbox: rows received more than `days` ago. An inbox row only answers "was this delivery
 *   applied already?"; past the broker's redelivery horizon no copy of the message can arrive.
 *   Found by message id (pruneInboxBatch), oldest first.
 * - outbox: rows PUBLISHED (confirmed by the broker) more than `days` ago; an unpublished row
 *   is never touched, however old.
 * - papers: revisions of papers of cases `closed` for `days` (state_since: in that state since),
 *   limited to what only a turn's replay reads — the model-call journal's request/response
 *   papers and the state papers of checkpoints superseded by a later one of the same task.
 *   The latest checkpoint of every task stays (a reply to a closed case reopens it and resumes
 *   from there), and so does every other paper (packets, evidence, summaries, outcomes' proof).
 *   A case with an effect call in doubt (intent/unknown), a held impact key or an unsettled
 *   dispatch is skipped whole. The ledger is never touched: it names paper hashes, not bytes,
 *   so its chain verifies as before.
 */
import type { Sql } from '../db.js';

/**
 * The SQL of a UUIDv7 bound of moment `at` (RFC 9562: Unix milliseconds in the first 48 bits):
 * `fill` '0' gives the smallest id of that millisecond, 'f' the largest.
 */
const v7Bound = (at: string, fill: '0' | 'f') => `(lpad(to_hex((extract(epoch FROM ${at}) * 1000)::bigint), 12, '0') || '${fill.repeat(20)}')::uuid`;

/**
 * The inbox has no index on received_at (migration 0026): its rows are found through the
 * primary key, which leads with the message id. Message ids are UUIDv7, so a row received
 * before the horizon has an id below the smallest id of that moment (its producer's clock
 * allowing). received_at decides, the id only finds: a producer clock running behind finds a
 * row early but never deletes it early; one running ahead finds it late. An id that is not
 * time-first (above the largest id of a day from now: not UUIDv7, or a clock far ahead) is found
 * by a second range of the key, whatever its age.
 */
export function pruneInboxBatch(days: number, limit: number): Sql {
  const cutoff = 'now() - make_interval(days => $1::int)';
  return {
    name: 'ev_retention_inbox',
    text: `WITH aged AS (
             SELECT message_id, consumer FROM inbox_messages
              WHERE message_id < ${v7Bound(cutoff, '0')}
                AND received_at < ${cutoff}
              ORDER BY message_id
              LIMIT $2::int
                FOR UPDATE SKIP LOCKED),
           not_time_first AS (
             SELECT message_id, consumer FROM inbox_messages
              WHERE message_id > ${v7Bound("now() + interval '1 day'", 'f')}
                AND received_at < ${cutoff}
              ORDER BY message_id
              LIMIT $2::int - (SELECT count(*) FROM aged)
                FOR UPDATE SKIP LOCKED)
           DELETE FROM inbox_messages i
            USING (SELECT message_id, consumer FROM aged UNION ALL SELECT message_id, consumer FROM not_time_first) d
            WHERE i.message_id = d.message_id AND i.consumer = d.consumer`,
    values: [days, limit],
  };
}

export function pruneOutboxBatch(days: number, limit: number): Sql {
  return {
    name: 'ev_retention_outbox',
    // created_at bounds the range the BRIN index finds; published_at is what decides.
    text: `WITH doomed AS (
             SELECT seq FROM outbox_messages
              WHERE created_at < now() - make_interval(days => $1::int)
                AND published_at IS NOT NULL
                AND published_at < now() - make_interval(days => $1::int)
              ORDER BY seq
              LIMIT $2::int
                FOR UPDATE SKIP LOCKED)
           DELETE FROM outbox_messages o USING doomed d WHERE o.seq = d.seq`,
    values: [days, limit],
  };
}

/** Cases whose replay papers may go: closed `days` ago, nothing in doubt, nothing held. */
const PRUNABLE_CASES = `
  SELECT c.id FROM cases c
   WHERE c.state = 'closed'
     AND c.state_since < now() - make_interval(days => $1::int)
     AND NOT EXISTS (SELECT 1 FROM tasks t JOIN runtime_calls rc ON rc.task_id = t.id
                      WHERE t.case_id = c.id AND rc.kind = 'effect' AND rc.status IN ('intent', 'unknown'))
     AND NOT EXISTS (SELECT 1 FROM impact_claims ic WHERE ic.case_id = c.id)
     AND NOT EXISTS (SELECT 1 FROM effect_dispatches ed WHERE ed.case_id = c.id AND ed.state NOT IN ('settled', 'refused'))`;

export function prunePapersBatch(days: number, limit: number): Sql {
  return {
    name: 'ev_retention_papers',
    text: `WITH cases_done AS (${PRUNABLE_CASES}),
           replay AS (
             SELECT rc.request_paper_id AS paper_id FROM runtime_calls rc JOIN tasks t ON t.id = rc.task_id
              WHERE t.case_id IN (SELECT id FROM cases_done) AND rc.request_paper_id IS NOT NULL
             UNION
             SELECT rc.response_paper_id FROM runtime_calls rc JOIN tasks t ON t.id = rc.task_id
              WHERE t.case_id IN (SELECT id FROM cases_done) AND rc.response_paper_id IS NOT NULL
             UNION
             SELECT tc.state_paper_id FROM turn_checkpoints tc JOIN tasks t ON t.id = tc.task_id
              WHERE t.case_id IN (SELECT id FROM cases_done)
                AND EXISTS (SELECT 1 FROM turn_checkpoints later WHERE later.task_id = tc.task_id AND later.turn > tc.turn)),
           kept AS (
             -- The latest checkpoint's state paper of every task, even where it is also named above.
             SELECT DISTINCT ON (tc.task_id) tc.state_paper_id AS paper_id
               FROM turn_checkpoints tc JOIN tasks t ON t.id = tc.task_id
              WHERE t.case_id IN (SELECT id FROM cases_done)
              ORDER BY tc.task_id, tc.turn DESC),
           doomed AS (
             SELECT pr.paper_id, pr.revision FROM paper_revisions pr
              WHERE pr.paper_id IN (SELECT paper_id FROM replay)
                AND pr.paper_id NOT IN (SELECT paper_id FROM kept)
              LIMIT $2::int
                FOR UPDATE SKIP LOCKED)
           DELETE FROM paper_revisions r USING doomed d
            WHERE r.paper_id = d.paper_id AND r.revision = d.revision`,
    values: [days, limit],
  };
}
