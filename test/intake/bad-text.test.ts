/**
 * Issue 12 item 5 over HTTP against a real intake + gate (one fleet node, real Postgres and
 * RabbitMQ): a NUL character or a lone UTF-16 surrogate in any accepted string field is refused
 * with 400 naming the field — never a 500 — and text from a source that cannot be refused (a
 * signed webhook's description) is stored with U+FFFD in its place. A numeric query parameter
 * beyond range is 400 naming the parameter.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { TOKENS, call, count, startFixture, ticketWebhook } from './helpers.js';
import type { IntakeFixture } from './helpers.js';

const SECRET = 'bad-text-webhook-secret-01';
const NUL = 'a\u0000b';
const LONE = 'a\ud800b';
let f: IntakeFixture;
let caseId: string;

beforeAll(async () => {
  f = await startFixture('bad_text', {
    sources: {
      webhooks: [
        ticketWebhook(SECRET),
      ],
      mailboxes: [],
    },
  });
  const opened = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'plain', title: 'a good case' } });
  expect(opened.status).toBe(201);
  caseId = opened.body['caseId'] as string;
});
afterAll(async () => {
  await f?.close();
});

/** The exact JSON text a client would send, escapes included (JSON.stringify keeps them). */
const post = (path: string, body: unknown, token: string = TOKENS.acme) => call(f.url, 'POST', path, { token, raw: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

describe('bad text is refused with 400 naming the field', () => {
  it.each([
    ['title', { caseType: 'plain', title: NUL }],
    ['title', { caseType: 'plain', title: LONE }],
    ['objective', { caseType: 'plain', title: 'ok', objective: NUL }],
    ['objective', { caseType: 'plain', title: 'ok', objective: LONE }],
    ['material', { caseType: 'plain', title: 'ok', material: `x${'\udc00'}` }],
    ['originKey', { caseType: 'plain', title: 'ok', originKey: NUL }],
  ])('POST /v1/cases with bad %s', async (field, body) => {
    const r = await post('/v1/cases', body);
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'invalid_text', field });
  });

  it('refuses it in raw JSON escapes too, and opens nothing', async () => {
    const before = await count(f.db, 'SELECT 1 FROM cases');
    const r = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, raw: '{"caseType":"plain","title":"x\\u0000y"}', headers: { 'content-type': 'application/json' } });
    expect([r.status, r.body['field']]).toEqual([400, 'title']);
    expect(await count(f.db, 'SELECT 1 FROM cases')).toBe(before);
  });

  it('operator reasons, answers and gate decisions', async () => {
    const cancel = await post(`/v1/cases/${caseId}/cancel`, { mode: 'soft', reason: NUL }, TOKENS.olga);
    expect([cancel.status, cancel.body['field']]).toEqual([400, 'reason']);
    const answer = await post(`/v1/questions/${newId()}/answer`, { answer: LONE });
    expect([answer.status, answer.body['field']]).toEqual([400, 'answer']);
    const decision = await post(`/v1/gates/${newId()}/decisions`, { decision: 'HW-payment', verdict: 'approve', digest: `sha256:${'0'.repeat(64)}`, reason: NUL }, TOKENS.olga);
    expect([decision.status, decision.body['field']]).toEqual([400, 'reason']);
    const revoke = await post(`/v1/gates/${newId()}/revoke`, { reason: LONE }, TOKENS.olga);
    expect([revoke.status, revoke.body['field']]).toEqual([400, 'reason']);
  });

  it('query parameters', async () => {
    const state = await call(f.url, 'GET', '/v1/cases?state=%00', { token: TOKENS.acme });
    expect([state.status, state.body['field']]).toEqual([400, 'state']);
    const gates = await call(f.url, 'GET', '/v1/gates?state=%00', { token: TOKENS.olga });
    expect([gates.status, gates.body['field']]).toEqual([400, 'state']);
  });
});

describe('numeric query parameters beyond range are 400 naming the parameter', () => {
  it.each([
    ['after', '99999999999999999999'],
    ['after', '9223372036854775808'],
    ['after', '-1'],
    ['after', '1e3'],
    ['limit', '99999999999999999999'],
    ['limit', '0'],
  ])('ledger %s=%s', async (name, value) => {
    const r = await call(f.url, 'GET', `/v1/cases/${caseId}/ledger?${name}=${value}`, { token: TOKENS.acme });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ error: 'invalid_query', field: name });
  });

  it('an in-range after still pages the ledger', async () => {
    const r = await call(f.url, 'GET', `/v1/cases/${caseId}/ledger?after=${Number.MAX_SAFE_INTEGER}`, { token: TOKENS.acme });
    expect(r.status).toBe(200);
    const list = await call(f.url, 'GET', '/v1/cases?limit=99999999999999999999', { token: TOKENS.acme });
    expect([list.status, list.body['field']]).toEqual([400, 'limit']);
  });
});

describe('text from a source that cannot be refused is stored safely', () => {
  it('a signed webhook whose description holds a NUL and a lone surrogate opens its case with U+FFFD', async () => {
    const body = JSON.stringify({ ticket: { id: 'BT-1', subject: 'Printer', description: `on${'\u0000'}fire ${'\ud800'}now`, org: 'acme' } });
    const sig = `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
    const r = await call(f.url, 'POST', '/v1/intake/tickets', { raw: body, headers: { 'content-type': 'application/json', 'x-signature': sig } });
    expect(r.status).toBe(201);
    const rows = (await f.db.query<{ objective: { text: string } }>({ text: 'SELECT objective FROM tasks WHERE case_id = $1', values: [r.body['caseId']] })).rows;
    expect(rows[0]!.objective.text).toContain('on\ufffdfire \ufffdnow');
  });

  it('the store guard: text no edge refused is a typed invalid_text from Postgres (400 at the HTTP edge), never a driver error', async () => {
    await expect(f.db.query({ text: 'SELECT $1::text', values: [NUL] })).rejects.toMatchObject({ code: 'invalid_text', retryable: false });
    await expect(f.db.query({ text: 'SELECT $1::jsonb', values: [JSON.stringify({ t: NUL })] })).rejects.toMatchObject({ code: 'invalid_text' });
    await expect(f.db.query({ text: 'SELECT $1::jsonb', values: [JSON.stringify({ t: LONE })] })).rejects.toMatchObject({ code: 'invalid_text' });
  });
});
