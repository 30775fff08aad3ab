/**
 * Intake HTTP API against real Postgres and RabbitMQ (issue 6 items 1 and 5): dedup under
 * concurrency, one unit of work per case, ownership on every read, body limits and field-named
 * errors, ledger paging, cancel and answer enqueueing their messages, signed webhooks.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { TOKENS, call, count, startFixture, ticketWebhook } from './helpers.js';
import type { IntakeFixture } from './helpers.js';

const SECRET = 'webhook-secret-0123456789';
let f: IntakeFixture;

beforeAll(async () => {
  f = await startFixture('intake-api', {
    sources: {
      webhooks: [
        ticketWebhook(SECRET),
      ],
      mailboxes: [],
    },
  });
});
afterAll(async () => {
  await f?.close();
});

const sign = (body: string) => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;

describe('POST /v1/cases', () => {
  it('opens one case, one root task and one task.runnable for 10 identical concurrent arrivals', async () => {
    const body = { caseType: 'support', title: 'Refund order 1234', objective: 'The customer asks for a refund', originKey: 'ticket-1234' };
    const replies = await Promise.all(Array.from({ length: 10 }, () => call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body })));
    const created = replies.filter((r) => r.status === 201);
    expect(created).toHaveLength(1);
    expect(replies.filter((r) => r.status === 200)).toHaveLength(9);
    const ids = new Set(replies.map((r) => r.body['caseId']));
    expect(ids.size).toBe(1);
    const caseId = [...ids][0] as string;
    expect(await count(f.db, 'SELECT 1 FROM cases WHERE id = $1', [caseId])).toBe(1);
    expect(await count(f.db, 'SELECT 1 FROM tasks WHERE case_id = $1 AND parent_id IS NULL', [caseId])).toBe(1);
    expect(await count(f.db, "SELECT 1 FROM outbox_messages WHERE case_id = $1 AND type = 'task.runnable'", [caseId])).toBe(1);
    expect(await count(f.db, "SELECT 1 FROM ledger WHERE case_id = $1 AND kind = 'case_opened'", [caseId])).toBe(1);
    // The root task carries the case type's profile and budget (case type beats profile).
    const task = (await f.db.query<{ profile: string; profile_version: string; budget_limit_minutes: string }>({ text: 'SELECT profile, profile_version, budget_limit_minutes::text FROM tasks WHERE case_id = $1', values: [caseId] })).rows[0]!;
    expect(task).toEqual({ profile: 'p', profile_version: '3', budget_limit_minutes: '45' });
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    expect(metrics).toMatch(/everdict_intake_cases_opened_total\{[^}]*source="api"[^}]*\} 1/);
    expect(metrics).toMatch(/everdict_intake_duplicate_arrivals_total\{[^}]*source="api"[^}]*\} 9/);
  });

  it('dedups on Idempotency-Key, and on the content when no key is sent', async () => {
    const a = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'plain', title: 'keyed' }, headers: { 'idempotency-key': 'k-1' } });
    const b = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'plain', title: 'keyed, retried' }, headers: { 'idempotency-key': 'k-1' } });
    expect([a.status, b.status]).toEqual([201, 200]);
    expect(b.body['caseId']).toBe(a.body['caseId']);
    const c = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'plain', title: 'unkeyed' } });
    const d = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'plain', title: 'unkeyed' } });
    expect([c.status, d.status]).toEqual([201, 200]);
    // The same client key from another principal is another arrival.
    const e = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.globex, body: { caseType: 'plain', title: 'keyed' }, headers: { 'idempotency-key': 'k-1' } });
    expect(e.status).toBe(201);
    expect(e.body['caseId']).not.toBe(a.body['caseId']);
  });

  it('refuses bad requests naming the field, oversize bodies with 413, unknown tokens with 401', async () => {
    const bad = async (body: unknown, field: string, status = 400) => {
      const r = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body });
      expect(r.status).toBe(status);
      expect(r.body['field']).toBe(field);
    };
    await bad({ title: 'x' }, 'caseType');
    await bad({ caseType: 'support' }, 'title');
    await bad({ caseType: 'support', title: 'x', objective: 7 }, 'objective');
    await bad({ caseType: 'nope', title: 'x' }, 'caseType', 422);
    await bad({ caseType: 'support', title: 'x', customer: 'globex' }, 'customer', 403);
    const olga = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.olga, body: { caseType: 'support', title: 'x' } });
    expect([olga.status, olga.body['field']]).toEqual([400, 'customer']);
    const malformed = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, raw: '{"caseType":', headers: { 'content-type': 'application/json' } });
    expect([malformed.status, malformed.body['error']]).toEqual([400, 'invalid_json']);
    const big = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'support', title: 'x', objective: 'y'.repeat(300 * 1024) } });
    expect(big.status).toBe(413);
    expect((await call(f.url, 'POST', '/v1/cases', { body: { caseType: 'support', title: 'x' } })).status).toBe(401);
    expect((await call(f.url, 'GET', '/v1/cases', { token: 'not-a-known-token' })).status).toBe(401);
  });
});

describe('reads enforce ownership', () => {
  it('shows a case to its customer and the all-customer operator, and 404s it for anyone else', async () => {
    const opened = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'support', title: 'Owned case', originKey: 'owned-1' } });
    const id = opened.body['caseId'] as string;
    const mine = await call(f.url, 'GET', `/v1/cases/${id}`, { token: TOKENS.acme });
    expect(mine.status).toBe(200);
    expect(mine.body).toMatchObject({ caseId: id, customer: 'acme', caseType: 'support', state: 'opened', gates: [], openQuestions: [] });
    const tasks = mine.body['tasks'] as { id: string; profile: string; children: unknown[] }[];
    expect(tasks).toHaveLength(1);
    expect(tasks[0]!.profile).toBe('p');
    expect((await call(f.url, 'GET', `/v1/cases/${id}`, { token: TOKENS.olga })).status).toBe(200);
    const theirs = await call(f.url, 'GET', `/v1/cases/${id}`, { token: TOKENS.globex });
    const missing = await call(f.url, 'GET', `/v1/cases/${newId()}`, { token: TOKENS.globex });
    // Same answer as a case that does not exist: existence does not leak.
    expect(theirs).toEqual(missing);
    expect(theirs.status).toBe(404);
    expect((await call(f.url, 'GET', `/v1/cases/${id}/ledger`, { token: TOKENS.globex })).status).toBe(404);
    expect((await call(f.url, 'POST', `/v1/cases/${id}/cancel`, { token: TOKENS.nobody, body: { mode: 'hard' } })).status).toBe(404);
    const list = await call(f.url, 'GET', '/v1/cases?limit=500', { token: TOKENS.globex });
    expect((list.body['cases'] as { customer: string }[]).every((c) => c.customer === 'globex')).toBe(true);
    expect((list.body['cases'] as { caseId: string }[]).some((c) => c.caseId === id)).toBe(false);
  });

  it('pages the case list and the ledger', async () => {
    for (let i = 0; i < 5; i++) await call(f.url, 'POST', '/v1/cases', { token: TOKENS.globex, body: { caseType: 'plain', title: `page ${i}`, originKey: `page-${i}` } });
    const seen: string[] = [];
    let next: string | null = null;
    do {
      const page = await call(f.url, 'GET', `/v1/cases?limit=2${next ? `&before=${next}` : ''}`, { token: TOKENS.globex });
      expect(page.status).toBe(200);
      seen.push(...(page.body['cases'] as { caseId: string }[]).map((c) => c.caseId));
      next = page.body['next'] as string | null;
    } while (next);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.length).toBe(await count(f.db, "SELECT 1 FROM cases WHERE customer = 'globex'"));

    const id = (await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'plain', title: 'ledger', originKey: 'ledger-1' } })).body['caseId'] as string;
    for (let i = 0; i < 4; i++) await call(f.url, 'POST', `/v1/cases/${id}/cancel`, { token: TOKENS.acme, body: { mode: 'soft' } });
    const all = await call(f.url, 'GET', `/v1/cases/${id}/ledger`, { token: TOKENS.acme });
    const entries = all.body['entries'] as { seq: number; kind: string }[];
    expect(entries.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(entries[0]!.kind).toBe('case_opened');
    const page = await call(f.url, 'GET', `/v1/cases/${id}/ledger?after=2&limit=2`, { token: TOKENS.acme });
    expect((page.body['entries'] as { seq: number }[]).map((e) => e.seq)).toEqual([3, 4]);
    expect(page.body['next']).toBe(4);
    const last = await call(f.url, 'GET', `/v1/cases/${id}/ledger?after=4&limit=2`, { token: TOKENS.acme });
    expect([(last.body['entries'] as unknown[]).length, last.body['next']]).toEqual([1, null]);
    const bad = await call(f.url, 'GET', `/v1/cases/${id}/ledger?after=-1`, { token: TOKENS.acme });
    expect([bad.status, bad.body['field']]).toEqual([400, 'after']);
  });
});

describe('writes', () => {
  it('cancel records the stop mode (never weakened) and enqueues task.cancel for the root task', async () => {
    const opened = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'support', title: 'cancel me', originKey: 'cancel-1' } });
    const id = opened.body['caseId'] as string;
    const hard = await call(f.url, 'POST', `/v1/cases/${id}/cancel`, { token: TOKENS.acme, body: { mode: 'hard' } });
    expect(hard.status).toBe(202);
    expect(hard.body).toMatchObject({ mode: 'hard', stopMode: 'hard', rootTaskId: opened.body['rootTaskId'] });
    const soft = await call(f.url, 'POST', `/v1/cases/${id}/cancel`, { token: TOKENS.acme, body: { mode: 'soft' } });
    expect(soft.body['stopMode']).toBe('hard');
    expect((await f.db.query<{ stop_mode: string }>({ text: 'SELECT stop_mode FROM cases WHERE id = $1', values: [id] })).rows[0]!.stop_mode).toBe('hard');
    const msgs = (await f.db.query<{ body: Buffer }>({ text: "SELECT body FROM outbox_messages WHERE case_id = $1 AND type = 'task.cancel' ORDER BY seq", values: [id] })).rows;
    expect(msgs.map((m) => (JSON.parse(m.body.toString('utf8')) as { payload: unknown }).payload)).toEqual([
      { taskId: opened.body['rootTaskId'], mode: 'hard', requestedBy: 'acme' },
      { taskId: opened.body['rootTaskId'], mode: 'soft', requestedBy: 'acme' },
    ]);
    const badMode = await call(f.url, 'POST', `/v1/cases/${id}/cancel`, { token: TOKENS.acme, body: { mode: 'gentle' } });
    expect([badMode.status, badMode.body['field']]).toEqual([400, 'mode']);
  });

  it('answer enqueues question.answered for the parked task, only for the owner, once', async () => {
    const opened = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'support', title: 'question', originKey: 'question-1' } });
    const caseId = opened.body['caseId'] as string;
    const taskId = opened.body['rootTaskId'] as string;
    const questionId = newId();
    await f.db.query({ text: "INSERT INTO questions (id, case_id, task_id, gap, decision_needed) VALUES ($1, $2, $3, 'which account?', 'account')", values: [questionId, caseId, taskId] });
    const shown = await call(f.url, 'GET', `/v1/cases/${caseId}`, { token: TOKENS.acme });
    expect((shown.body['openQuestions'] as { id: string }[]).map((q) => q.id)).toEqual([questionId]);

    expect((await call(f.url, 'POST', `/v1/questions/${questionId}/answer`, { token: TOKENS.globex, body: { answer: 'acct 7' } })).status).toBe(404);
    const empty = await call(f.url, 'POST', `/v1/questions/${questionId}/answer`, { token: TOKENS.acme, body: { answer: '' } });
    expect([empty.status, empty.body['field']]).toEqual([400, 'answer']);
    const ok = await call(f.url, 'POST', `/v1/questions/${questionId}/answer`, { token: TOKENS.acme, body: { answer: 'acct 7' } });
    expect(ok.status).toBe(202);
    const rows = (await f.db.query<{ body: Buffer }>({ text: "SELECT body FROM outbox_messages WHERE case_id = $1 AND type = 'question.answered'", values: [caseId] })).rows;
    expect(rows).toHaveLength(1);
    const env = JSON.parse(rows[0]!.body.toString('utf8')) as { payload: unknown; sender: { service: string } };
    expect(env.payload).toEqual({ questionId, taskId, answer: 'acct 7', answeredBy: 'acme' });
    expect(env.sender.service).toBe('intake');
    // Once the turn-worker has recorded an answer, a second one is refused.
    await f.db.query({ text: "UPDATE questions SET answer = 'acct 7', answered_by = 'acme', answered_at = now() WHERE id = $1", values: [questionId] });
    expect((await call(f.url, 'POST', `/v1/questions/${questionId}/answer`, { token: TOKENS.acme, body: { answer: 'acct 8' } })).status).toBe(409);
  });

  it('the fleet view needs the operator role', async () => {
    expect((await call(f.url, 'GET', '/v1/fleet', { token: TOKENS.acme })).status).toBe(403);
    const view = await call(f.url, 'GET', '/v1/fleet', { token: TOKENS.olga });
    expect(view.status).toBe(200);
    expect((view.body['tasks'] as Record<string, number>)['open']).toBeGreaterThan(0);
    const queues = view.body['queues'] as { queue: string; messages: number }[];
    expect(queues.some((q) => q.queue === `${f.prefix}.turn-worker` && q.messages >= 0)).toBe(true);
  });
});

describe('ticket webhooks', () => {
  const delivery = (id: string) => JSON.stringify({ ticket: { id, subject: `Ticket ${id}`, description: 'printer on fire', org: 'acme' } });

  it('opens one case for 10 concurrent signed deliveries of the same ticket', async () => {
    const body = delivery('T-1');
    const replies = await Promise.all(
      Array.from({ length: 10 }, () => call(f.url, 'POST', '/v1/intake/tickets', { raw: body, headers: { 'content-type': 'application/json', 'x-signature': sign(body) } })),
    );
    expect(replies.filter((r) => r.status === 201)).toHaveLength(1);
    expect(replies.filter((r) => r.status === 200)).toHaveLength(9);
    const caseId = replies[0]!.body['caseId'] as string;
    expect(await count(f.db, "SELECT 1 FROM cases WHERE origin_key = 'webhook:tickets:T-1' AND customer = 'acme' AND case_type = 'support'")).toBe(1);
    expect(await count(f.db, "SELECT 1 FROM outbox_messages WHERE case_id = $1 AND type = 'task.runnable'", [caseId])).toBe(1);
  });

  it('refuses a bad signature with 401 and stores nothing', async () => {
    const before = { cases: await count(f.db, 'SELECT 1 FROM cases'), outbox: await count(f.db, 'SELECT 1 FROM outbox_messages'), ledger: await count(f.db, 'SELECT 1 FROM ledger') };
    const body = delivery('T-2');
    const forged = await call(f.url, 'POST', '/v1/intake/tickets', { raw: body, headers: { 'content-type': 'application/json', 'x-signature': sign(delivery('T-other')) } });
    const unsigned = await call(f.url, 'POST', '/v1/intake/tickets', { raw: body, headers: { 'content-type': 'application/json' } });
    expect([forged.status, unsigned.status]).toEqual([401, 401]);
    expect(JSON.stringify(forged.body)).not.toContain(SECRET);
    const after = { cases: await count(f.db, 'SELECT 1 FROM cases'), outbox: await count(f.db, 'SELECT 1 FROM outbox_messages'), ledger: await count(f.db, 'SELECT 1 FROM ledger') };
    expect(after).toEqual(before);
    expect(await count(f.db, "SELECT 1 FROM cases WHERE origin_key = 'webhook:tickets:T-2'")).toBe(0);
    expect((await call(f.url, 'POST', '/v1/intake/unknown', { raw: body, headers: { 'x-signature': sign(body) } })).status).toBe(404);
    // Over the source's limit: 413 even when correctly signed, and nothing stored.
    const huge = JSON.stringify({ ticket: { id: 'T-3', subject: 'big', description: 'x'.repeat(8192), org: 'acme' } });
    expect((await call(f.url, 'POST', '/v1/intake/tickets', { raw: huge, headers: { 'content-type': 'application/json', 'x-signature': sign(huge) } })).status).toBe(413);
    expect(await count(f.db, "SELECT 1 FROM cases WHERE origin_key = 'webhook:tickets:T-3'")).toBe(0);
  });
});
