/**
 * Retention (issue 15 item 3, seed D49) on a real reconciler process (`everdict start --service
 * reconciler`) over real Postgres:
 *
 * - With the defaults (no `closedCasePapersDays`) a pass prunes inbox rows received more than
 *   8 days ago (UUIDv7 ids of that time, and ids that are not time-first) and outbox rows
 *   published more than 7 days ago, in batches of `batchRows`, and keeps younger inbox rows
 *   (also one whose id is older than the horizon), younger published rows and every
 *   unpublished row however old.
 *   No paper is touched. `everdict_retention_pruned_total{kind}` counts exactly the rows gone.
 * - A SIGHUP reload setting `closedCasePapersDays: 2` applies to the next pass: the replay
 *   papers (model-call request/response, superseded checkpoint state) of the case closed 3 days
 *   ago go; its latest checkpoint's state paper and its packet paper stay. An open case, a case
 *   closed 3 days ago with an effect call in doubt and a case closed an hour ago keep every
 *   paper. Every case's ledger still verifies.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { retentionPolicy } from '../../services/reconciler/src/retention.js';
import { effectsFixture, eventually, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;
let configPath: string;

interface Seeded {
  caseId: string;
  /** Revisions retention may take once the case qualifies. */
  replay: string[];
  /** Papers it must never take. */
  kept: string[];
}

/** A case with one task, one model call (request + response papers), two checkpoints and a packet paper. */
async function seedCase(label: string, o: { state: string; since: string; effectInDoubt?: boolean }): Promise<Seeded> {
  const seeded = await f.store.unitOfWork(async (uow) => {
    const { caseId } = await uow.openCase({ caseType: 't', originKey: `retention:${label}:${newId()}`, customer: 'acme', title: label });
    const taskId = await uow.createTask({ caseId, profile: 'p' });
    const put = (name: string) => uow.putPaper({ caseId, kind: 'artefact', name: `${label}/${name}`, schemaId: 'test.v1', bytes: Buffer.from(`${label} ${name} `.repeat(50), 'utf8') });
    const request = await put('request');
    const response = await put('response');
    const oldState = await put('state-0');
    const newState = await put('state-1');
    const packet = await put('packet');
    await uow.query({
      text: `INSERT INTO runtime_calls (id, task_id, turn, ordinal, kind, status, fence_epoch, request_paper_id, response_paper_id)
             VALUES ($1, $2, 0, 0, 'model', 'completed', 1, $3, $4)`,
      values: [newId(), taskId, request.paperId, response.paperId],
    });
    if (o.effectInDoubt) {
      await uow.query({ text: `INSERT INTO runtime_calls (id, task_id, turn, ordinal, kind, status, fence_epoch) VALUES ($1, $2, 1, 0, 'effect', 'unknown', 1)`, values: [newId(), taskId] });
    }
    for (const [turn, paper] of [[0, oldState], [1, newState]] as const) {
      await uow.query({ text: `INSERT INTO turn_checkpoints (task_id, turn, state_paper_id, state_hash, fence_epoch) VALUES ($1, $2, $3, $4, 1)`, values: [taskId, turn, paper.paperId, paper.contentHash] });
    }
    await uow.appendLedger(caseId, { kind: 'test_note', body: { label } });
    return { caseId, replay: [request.paperId, response.paperId, oldState.paperId], kept: [newState.paperId, packet.paperId] };
  });
  // The case's derived state as the lifecycle would have written it, aged to `since`.
  await f.db.query({ text: `UPDATE cases SET state = $2, state_since = now() - $3::interval WHERE id = $1`, values: [seeded.caseId, o.state, o.since] });
  return seeded;
}

async function revisionsOf(paperIds: readonly string[]): Promise<number> {
  const { rows } = await f.db.query<{ n: string }>({ text: 'SELECT count(*) AS n FROM paper_revisions WHERE paper_id = ANY($1::uuid[])', values: [paperIds] });
  return Number(rows[0]!.n);
}

/** A UUIDv7 message id allocated `ageDays` ago: its first 48 bits are the allocation time (ms). */
function idFromDaysAgo(ageDays: number): string {
  const ms = (Date.now() - ageDays * 86_400_000).toString(16).padStart(12, '0');
  return `${ms.slice(0, 8)}-${ms.slice(8, 12)}${newId().slice(13)}`;
}

/** `n` inbox rows received `ageDays` ago; their ids are of that moment too, as a producer's are, unless `idOf` says otherwise. */
async function seedInbox(n: number, ageDays: number, idOf: () => string = () => idFromDaysAgo(ageDays)): Promise<void> {
  for (let i = 0; i < n; i++) {
    await f.db.query({
      text: `INSERT INTO inbox_messages (consumer, message_id, payload_hash, type, disposition, received_at) VALUES ('test-consumer', $1, $2, 'test.message', 'applied', now() - make_interval(days => $3::int))`,
      values: [idOf(), `sha256:${'0'.repeat(64)}`, ageDays],
    });
  }
}

async function seedOutbox(n: number, ageDays: number, published: boolean): Promise<void> {
  for (let i = 0; i < n; i++) {
    await f.db.query({
      // An unpublished row is held by a (test) relay claim for the hour, so it stays unpublished.
      text: `INSERT INTO outbox_messages (message_id, type, routing_key, body, created_at, published_at, claimed_by, claimed_until)
             VALUES ($1, 'test.message', 'test.none', '\\x00'::bytea, now() - make_interval(days => $2::int), CASE WHEN $3::boolean THEN now() - make_interval(days => $2::int) END,
                     CASE WHEN $3::boolean THEN NULL ELSE 'test-relay' END, CASE WHEN $3::boolean THEN NULL ELSE now() + interval '1 hour' END)`,
      values: [newId(), ageDays, published],
    });
  }
}

const count = async (sql: string) => Number((await f.db.query<{ n: string }>({ text: sql })).rows[0]!.n);

async function pruned(kind: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${node.port}/metrics`)).text();
  const m = new RegExp(`^everdict_retention_pruned_total\\{[^}]*kind="${kind}"[^}]*\\} (\\d+)`, 'm').exec(text);
  if (!m) throw new Error(`everdict_retention_pruned_total{kind="${kind}"} not exported`);
  return Number(m[1]);
}

function writeRetention(retention: FleetConfig['retention']): void {
  const fleet = JSON.parse(readFileSync(configPath, 'utf8')) as FleetConfig;
  fleet.retention = retention;
  writeFileSync(configPath, JSON.stringify(fleet, null, 2));
}

let closedOld: Seeded;
let open: Seeded;
let inDoubt: Seeded;
let closedYoung: Seeded;

beforeAll(async () => {
  f = await effectsFixture('effects_retention');
  configPath = join(f.dir, 'fleet.json');
  closedOld = await seedCase('closed-old', { state: 'closed', since: '3 days' });
  open = await seedCase('open', { state: 'running', since: '30 days' });
  inDoubt = await seedCase('in-doubt', { state: 'closed', since: '3 days', effectInDoubt: true });
  closedYoung = await seedCase('closed-young', { state: 'closed', since: '1 hour' });
  await seedInbox(7, 9);
  // Ids that are not time-first (v4), old and young.
  await seedInbox(2, 9, randomUUID);
  await seedInbox(2, 7);
  await seedInbox(1, 7, randomUUID);
  // Received 7 days ago under an id of 10 days ago (a producer clock behind): found, not yet due.
  await seedInbox(1, 7, () => idFromDaysAgo(10));
  await seedOutbox(5, 8, true);
  await seedOutbox(1, 6, true);
  await seedOutbox(2, 30, false);
  // Small batches and a short interval, so a pass takes several statements and passes follow quickly.
  writeRetention({ batchRows: 3, batchPauseMs: 20, intervalMinutes: 0.005 });
  node = await f.start({ services: ['reconciler'] });
}, 120_000);
afterAll(async () => f?.close());

describe('retention', () => {
  it('prunes old inbox and published outbox rows in batches, keeps the rest and every paper', async () => {
    await eventually(async () => (await pruned('inbox')) === 9 && (await pruned('outbox')) === 5, { timeoutMs: 20_000, what: 'the first pass pruned inbox and outbox' }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${node.output().slice(-3000)}`);
    });
    expect(await count(`SELECT count(*) AS n FROM inbox_messages WHERE consumer = 'test-consumer'`)).toBe(4);
    expect(await count(`SELECT count(*) AS n FROM inbox_messages WHERE consumer = 'test-consumer' AND received_at < now() - interval '8 days'`)).toBe(0);
    expect(await count(`SELECT count(*) AS n FROM outbox_messages WHERE type = 'test.message' AND published_at IS NOT NULL`)).toBe(1);
    expect(await count(`SELECT count(*) AS n FROM outbox_messages WHERE type = 'test.message' AND published_at IS NULL AND created_at < now() - interval '29 days'`)).toBe(2);
    // Passes keep running (short interval); none takes a paper while closedCasePapersDays is unset.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await pruned('papers')).toBe(0);
    for (const c of [closedOld, open, inDoubt, closedYoung]) expect(await revisionsOf([...c.replay, ...c.kept])).toBe(5);
  }, 60_000);

  it('after a SIGHUP reload, prunes the replay papers of cases closed long enough, and only those', async () => {
    writeRetention({ batchRows: 2, batchPauseMs: 20, intervalMinutes: 0.005, closedCasePapersDays: 2 });
    node.proc.kill('SIGHUP');
    await eventually(async () => (await revisionsOf(closedOld.replay)) === 0, { timeoutMs: 20_000, what: 'the replay papers of the old closed case pruned' }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${node.output().slice(-3000)}`);
    });
    expect(await revisionsOf(closedOld.kept)).toBe(2);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await pruned('papers')).toBe(3);
    for (const c of [open, inDoubt, closedYoung]) expect(await revisionsOf([...c.replay, ...c.kept])).toBe(5);
    for (const c of [closedOld, open, inDoubt, closedYoung]) expect(await f.store.verifyLedger(c.caseId)).toMatchObject({ ok: true });
  }, 60_000);
});

describe('retention policy (pure)', () => {
  it('keeps everything but inbox and published outbox rows unless configured', () => {
    expect(retentionPolicy(undefined)).toEqual({ days: { inbox: 8, outbox: 7, papers: null }, batchRows: 1000, pauseMs: 200, intervalMs: 3_600_000 });
    expect(retentionPolicy({ closedCasePapersDays: 30, inboxDays: 14, batchRows: 500, intervalMinutes: 5 })).toMatchObject({ days: { inbox: 14, outbox: 7, papers: 30 }, batchRows: 500, intervalMs: 300_000 });
  });
});
