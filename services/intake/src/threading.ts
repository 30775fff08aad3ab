/**
 * Threading (issue 13 item 3): an arrival that belongs to an existing case — a mail replying
 * to the case's mail (In-Reply-To / References naming a Message-ID the case recorded), or a
 * webhook naming the case's origin key (a comment on the same ticket) — appends to THAT case
 * as a new input instead of opening a second one:
 *
 *   the root parked on an open question  → the input answers it: `question.answered` (the same
 *                                          message as an HTTP answer), which wakes exactly
 *                                          that task;
 *   the case resolved or closed, or its  → the input REOPENS it: a new root task (the done
 *   root done and the customer not told    root cannot run again) under the previous root's
 *   yet                                    profile, with the input as its objective and the
 *                                          answer the customer was sent as context; the close
 *                                          is cleared, a `case_reopened` ledger record names
 *                                          both roots, and the state is re-derived (running);
 *   the case resolved and the input the  → the input CLOSES it (the customer's explicit
 *   customer's closure (customerClosure)   confirmation, seed 004 §11.1): closed_at/closed_by,
 *                                          a `case_closed` ledger record naming the channel,
 *                                          the state re-derived (closed); a closure of a case
 *                                          already closed changes nothing;
 *   otherwise                            → the input is a note for the root task, read at its
 *                                          next turn.
 *
 * A closure is a reply mail whose first line of its own (not quoted, not blank) is one of
 * CLOSE_WORDS — the reply the customer was sent says so — or a ticket webhook whose event
 * (the mapping's `event` field, GitHub's `issues.<action>`) says `closed`. Any other input to a
 * resolved case reopens it, as before; a closure of a case not resolved is appended like any
 * input (the agent is told; withdrawal is a cancel, not a close).
 *
 * Every input is recorded in `case_inputs` under its input key in the unit of work that
 * applies it, so a redelivery (mail sources and webhooks deliver at least once) applies
 * nothing twice. Threading is scoped to the customer the source names: a reply naming another
 * customer's Message-ID opens a case of its own.
 */
import type { NormalisedArrival, OpenedCase } from '@everdict/intake-sources';
import { normaliseMessageId } from '@everdict/intake-sources';
import { storableText } from '@everdict/http-api';
import { addNote, enqueuePlatformMessage, refreshCaseState } from '@everdict/store';
import type { Queryable, Store, UnitOfWork } from '@everdict/store';

/** Most References a reply is matched on (newest first); a longer chain is rare and unbounded. */
const MAX_REFERENCES = 50;
/** The question.answered payload's limit on answer text. */
const MAX_ANSWER_CHARS = 16000;

// ------------------------------------------------------------------------------ pure decisions

/** The arrival's identity as one input: a webhook redelivery has the same body, a new comment on the same ticket does not. */
export function inputKey(a: NormalisedArrival): string {
  return a.raw.kind === 'webhook' ? `${a.originKey}#sha256:${a.raw.bodySha256}` : a.originKey;
}

/** Message-IDs a mail replies to, most specific first: In-Reply-To, then References newest first. */
export function replyTargets(a: NormalisedArrival): string[] {
  if (a.raw.kind !== 'imap') return [];
  const ids = [a.raw.inReplyTo, ...[...a.raw.references].reverse()].map((x) => normaliseMessageId(x)).filter((x): x is string => x !== undefined);
  return [...new Set(ids)].slice(0, MAX_REFERENCES);
}

/** The arrival's own Message-ID, so replies to it thread too. */
export function ownMessageId(a: NormalisedArrival): string | undefined {
  return a.raw.kind === 'imap' ? normaliseMessageId(a.raw.messageId) : undefined;
}

/**
 * The new text of a reply: quoted lines (`>`) and the attribution line introducing them
 * ("On … wrote:") dropped, so an answer is what the customer wrote, not the thread again.
 * Falls back to the title when nothing is left.
 */
export function replyText(a: Pick<NormalisedArrival, 'title' | 'body'>): string {
  // Mail and webhook text cannot be refused: NULs and lone surrogates become U+FFFD, as in openCase.
  const lines = storableText(a.body).split(/\r?\n/);
  const kept = lines.filter((l) => !/^\s*>/.test(l));
  while (kept.length > 0 && /^\s*$/.test(kept[kept.length - 1]!)) kept.pop();
  if (kept.length > 0 && /\bwrote:\s*$/.test(kept[kept.length - 1]!)) kept.pop();
  const text = kept.join('\n').trim();
  // Re-cleaned after the cut: a cut through a surrogate pair leaves a lone half.
  return storableText((text.length > 0 ? text : storableText(a.title)).slice(0, MAX_ANSWER_CHARS));
}

/** A reply's first own line that confirms the case may close (case-insensitive, trailing punctuation ignored). */
export const CLOSE_WORDS: readonly string[] = ['close', 'closed', 'confirm', 'confirmed'];

/** Pure: the channel by which the arrival is the customer's closure of its case, or null when it is not one. */
export function customerClosure(a: Pick<NormalisedArrival, 'body' | 'raw'>): 'mail' | 'webhook' | null {
  if (a.raw.kind === 'webhook') return a.raw.event !== undefined && /(?:^|[.:/_ -])closed$/i.test(a.raw.event.trim()) ? 'webhook' : null;
  if (a.raw.kind !== 'imap') return null;
  const first = storableText(a.body)
    .split(/\r?\n/)
    .find((l) => !/^\s*>/.test(l) && l.trim().length > 0);
  if (first === undefined) return null;
  return CLOSE_WORDS.includes(first.trim().replace(/[.!\s]+$/, '').toLowerCase()) ? 'mail' : null;
}

/** Who answered, as a principal-shaped id: the channel and the case's customer (never an address). */
export function channelPrincipal(source: NormalisedArrival['source'], customer: string): string {
  return `${source}:${customer.replace(/[^A-Za-z0-9._@:-]/g, '_')}`.slice(0, 128);
}

// ------------------------------------------------------------------------------ SQL

interface TargetRow {
  readonly id: string;
  readonly state: string;
  readonly customer: string;
  readonly state_reason: string | null;
}

/** The case an arrival threads into: its own origin key first, then the Message-IDs it replies to. */
async function findThreadTarget(q: Queryable, a: NormalisedArrival, customer: string): Promise<string | undefined> {
  const byKey = await q.query<{ id: string }>({ text: `SELECT id FROM cases WHERE origin_key = $1 AND customer = $2`, values: [a.originKey, customer] });
  if (byKey.rows[0]) return byKey.rows[0].id;
  const ids = replyTargets(a);
  if (ids.length === 0) return undefined;
  // array_position keeps the most specific match (In-Reply-To before References).
  const r = await q.query<{ id: string }>({
    text: `SELECT c.id FROM case_message_ids m JOIN cases c ON c.id = m.case_id
            WHERE m.message_id = ANY($1::text[]) AND c.customer = $2
            ORDER BY array_position($1::text[], m.message_id) LIMIT 1`,
    values: [ids, customer],
  });
  return r.rows[0]?.id;
}

/**
 * Serialises inputs to one case, so two replies never both take the same open question. A
 * transaction-level advisory lock only inputs take, taken before any row lock: it joins no
 * lock cycle with the turn-worker or the case-state refresh.
 */
async function serialiseInputs(uow: UnitOfWork, caseId: string): Promise<void> {
  await uow.query({ text: `SELECT pg_advisory_xact_lock(hashtext('everdict.case_input'), hashtext($1::text))`, values: [caseId] });
}

/**
 * Locks the case's ledger head, then its row — the order every case-row writer keeps — after
 * the question and task rows (the turn-worker's order: question, task, ledger head, case).
 */
async function lockCase(uow: UnitOfWork, caseId: string): Promise<TargetRow | undefined> {
  const r = await uow.query<TargetRow>({
    text: `SELECT c.id, c.state, c.state_reason, c.customer FROM ledger_heads h JOIN cases c ON c.id = h.case_id WHERE h.case_id = $1 FOR UPDATE OF h, c`,
    values: [caseId],
  });
  return r.rows[0];
}

/** Records the input once; false when this input key was applied before (a redelivery). */
async function recordInput(uow: UnitOfWork, caseId: string, a: NormalisedArrival, appliedAs: 'opened' | 'answered' | 'appended' | 'reopened' | 'closed', questionId: string | null): Promise<boolean> {
  const r = await uow.query({
    text: `INSERT INTO case_inputs (input_key, case_id, origin_key, source, applied_as, question_id) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (input_key) DO NOTHING`,
    values: [inputKey(a), caseId, a.originKey, a.source, appliedAs, questionId],
  });
  return r.rowCount === 1;
}

async function recordMessageId(uow: UnitOfWork, caseId: string, a: NormalisedArrival): Promise<void> {
  const mid = ownMessageId(a);
  if (mid === undefined) return;
  await uow.query({ text: `INSERT INTO case_message_ids (message_id, case_id, direction) VALUES ($1, $2, 'received') ON CONFLICT (message_id) DO NOTHING`, values: [mid, caseId] });
}

/**
 * The root's open question a customer can answer: unanswered, the root parked on exactly it,
 * and no earlier input already sent its answer (that one is on its way: a second input is new
 * material, not a second answer the turn-worker would ignore).
 */
async function openRootQuestion(uow: UnitOfWork, caseId: string): Promise<{ questionId: string; taskId: string } | undefined> {
  const r = await uow.query<{ question_id: string; task_id: string }>({
    text: `SELECT q.id AS question_id, q.task_id FROM questions q JOIN tasks t ON t.id = q.task_id
            WHERE q.case_id = $1 AND q.answer IS NULL AND t.parent_id IS NULL
              AND t.state = 'parked' AND t.park_reason = 'question' AND t.park_detail->>'questionId' = q.id::text
              AND NOT EXISTS (SELECT 1 FROM case_inputs i WHERE i.question_id = q.id)
            ORDER BY q.created_at LIMIT 1 FOR KEY SHARE OF q, t`,
    values: [caseId],
  });
  const row = r.rows[0];
  return row ? { questionId: row.question_id, taskId: row.task_id } : undefined;
}

async function rootTask(uow: UnitOfWork, caseId: string): Promise<string | undefined> {
  return (await uow.query<{ id: string }>({ text: `SELECT id FROM tasks WHERE case_id = $1 AND parent_id IS NULL ORDER BY created_at DESC, id DESC LIMIT 1 FOR KEY SHARE`, values: [caseId] })).rows[0]?.id;
}

/** A case the customer was answered on (or is about to be): a new input reopens it. */
export function reopens(state: string, reason: string | null): boolean {
  return state === 'resolved' || state === 'closed' || (state === 'parked' && reason === 'telling_customer');
}

/** The reopened case's new root objective: the customer's new input, with the answer they were sent as context. */
export function reopenObjective(title: string, input: string, previousAnswer: string | null): { text: string } {
  const head = `${storableText(title)}\n\n${input}`;
  return { text: previousAnswer ? `${head}\n\n(This case was answered before; the answer the customer was sent:)\n${previousAnswer}` : head };
}

/**
 * Reopens the case with a new root task (see the module comment). The caller holds the input
 * lock and the ledger head and case row locks.
 */
async function reopenCase(uow: UnitOfWork, target: TargetRow, a: NormalisedArrival, sender: 'intake'): Promise<void> {
  const prev = (
    await uow.query<{ id: string; profile: string; profile_version: string; budget_limit_minutes: string | null; told: string | null }>({
      text: `SELECT t.id, t.profile, t.profile_version, t.budget_limit_minutes, n.text AS told
               FROM tasks t LEFT JOIN customer_notifications n ON n.root_task_id = t.id
              WHERE t.case_id = $1 AND t.parent_id IS NULL ORDER BY t.created_at DESC, t.id DESC LIMIT 1`,
      values: [target.id],
    })
  ).rows[0];
  if (!prev) return;
  const rootTaskId = await uow.createTask({
    caseId: target.id,
    profile: prev.profile,
    profileVersion: prev.profile_version,
    objective: reopenObjective(a.title, replyText(a), prev.told),
    budgetLimitMinutes: prev.budget_limit_minutes === null ? null : Number(prev.budget_limit_minutes),
  });
  await uow.query({ text: `UPDATE cases SET closed_at = NULL, closed_by = NULL, row_version = row_version + 1, updated_at = now() WHERE id = $1`, values: [target.id] });
  await enqueuePlatformMessage(uow, sender, 'task.runnable', target.id, { taskId: rootTaskId, reason: 'opened' });
  await uow.appendLedger(target.id, {
    kind: 'case_reopened',
    body: { source: a.source, originKey: a.originKey, receivedAt: a.receivedAt, fromState: target.state, previousRootTaskId: prev.id, rootTaskId },
  });
  await refreshCaseState(uow, target.id, { cause: 'case_reopened', taskId: rootTaskId });
}

/**
 * Closes a resolved case on its customer's word (the caller holds the ledger head and case row
 * locks and has checked the state): who closed and by which channel, in the ledger; the state
 * re-derived in the same unit of work.
 */
export async function markCaseClosed(uow: UnitOfWork, caseId: string, by: string, channel: 'api' | 'mail' | 'webhook', detail: Record<string, unknown> = {}): Promise<void> {
  await uow.query({ text: `UPDATE cases SET closed_at = now(), closed_by = $2, row_version = row_version + 1, updated_at = now() WHERE id = $1`, values: [caseId, by] });
  await uow.appendLedger(caseId, { kind: 'case_closed', body: { by, channel, ...detail } });
  await refreshCaseState(uow, caseId, { cause: 'customer_closed' });
}

/**
 * Records the Message-ID of a mail sent for the case (a notification, a reply), in the unit of
 * work that sends it, so a reply to that mail threads into the case.
 */
export async function recordSentMessageId(uow: UnitOfWork, caseId: string, messageId: string): Promise<void> {
  const mid = normaliseMessageId(messageId);
  if (mid === undefined) return;
  await uow.query({ text: `INSERT INTO case_message_ids (message_id, case_id, direction) VALUES ($1, $2, 'sent') ON CONFLICT (message_id) DO NOTHING`, values: [mid, caseId] });
}

// ------------------------------------------------------------------------------ units of work

/** Called inside openCase's unit of work: the opening arrival is the case's first input and its Message-ID starts the thread. */
export async function recordOpeningArrival(uow: UnitOfWork, caseId: string, a: NormalisedArrival): Promise<void> {
  await recordInput(uow, caseId, a, 'opened', null);
  await recordMessageId(uow, caseId, a);
}

/**
 * Threads the arrival into an existing case and applies it, in one unit of work; undefined
 * when it belongs to no case (the caller opens one). A redelivered input answers the case it
 * went to with `created: false` and writes nothing.
 */
export async function threadArrival(store: Store, a: NormalisedArrival, customer: string, sender: 'intake'): Promise<OpenedCase | undefined> {
  return store.unitOfWork(async (uow) => {
    const found = await findThreadTarget(uow, a, customer);
    if (found === undefined) return undefined;
    // Lock order: inputs, question and task rows, ledger head, case row (see lockCase).
    await serialiseInputs(uow, found);
    const question = await openRootQuestion(uow, found);
    const root = question ? question.taskId : await rootTask(uow, found);
    const target = await lockCase(uow, found);
    if (!target) return undefined;
    // The input key's row is written first: a redelivery (or a replica racing this one) finds
    // it taken and applies nothing.
    const closure = question ? null : customerClosure(a);
    const closes = closure !== null && (target.state === 'resolved' || target.state === 'closed');
    const reopen = !question && !closes && reopens(target.state, target.state_reason);
    if (!(await recordInput(uow, target.id, a, question ? 'answered' : closes ? 'closed' : reopen ? 'reopened' : 'appended', question?.questionId ?? null))) return { caseId: target.id, created: false };
    const ledgerBase = { source: a.source, originKey: a.originKey, receivedAt: a.receivedAt, attachments: a.attachments.length };
    if (closes) {
      // Closed already: the confirmation changes nothing (its input row is the record).
      if (target.state === 'resolved') await markCaseClosed(uow, target.id, channelPrincipal(a.source, target.customer), closure, { source: a.source, originKey: a.originKey, receivedAt: a.receivedAt });
    } else if (question) {
      const answeredBy = channelPrincipal(a.source, target.customer);
      const messageId = await enqueuePlatformMessage(uow, sender, 'question.answered', target.id, { questionId: question.questionId, taskId: question.taskId, answer: replyText(a), answeredBy });
      // Bodies and addresses stay out of the ledger: it names the input and what it did.
      await uow.appendLedger(target.id, { kind: 'answer_submitted', body: { ...ledgerBase, questionId: question.questionId, taskId: question.taskId, answeredBy, messageId, threaded: true } });
    } else if (reopen) {
      await reopenCase(uow, target, a, sender);
    } else {
      if (root) await addNote(uow, root, 'case_input', { source: a.source, title: storableText(a.title), text: replyText(a), receivedAt: a.receivedAt }, null);
      await uow.appendLedger(target.id, { kind: 'case_input_appended', body: { ...ledgerBase, rootTaskId: root ?? null, caseState: target.state } });
    }
    await recordMessageId(uow, target.id, a);
    return { caseId: target.id, created: false };
  });
}
