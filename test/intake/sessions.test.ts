/**
 * Sessions (issue 13 item 2, seed 004 §11.1) on a REAL intake process (`everdict start
 * --service intake`) over real Postgres and RabbitMQ:
 *
 * - The first operator to operate a case becomes its controller; a second principal without
 *   the `operator` role can neither operate it (403 `not_controller` naming the controller,
 *   nothing written) nor take it over (403).
 * - A principal with the role takes over: the handover is ledgered (from/to/reason) and the
 *   previous controller is notified (a NOTIFY on the handover channel, delivered at commit);
 *   the previous controller's next action is then 403. The new controller stops and resumes
 *   the session; the case view shows state, controller and since.
 * - A customer acts on its case while no operator controls it (and becomes no controller); once
 *   an operator acts, the customer's next action is refused.
 * - Two principals acting first at once: exactly one becomes the controller.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { SESSION_HANDOVER_CHANNEL, createPgDb } from '@everdict/store';
import type { Db } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, eventually, freePort, freshDatabase, startEverdictNode } from '@everdict/testkit';
import type { EverdictNode } from '@everdict/testkit';
import { call, count, deletePrefixTopology, tokenHash } from './helpers.js';

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
const TOKENS = { acme: 'sessions-acme-token-01', ann: 'sessions-ann-token-02', olga: 'sessions-olga-token-03', oscar: 'sessions-oscar-token-04' } as const;

function fleet(): FleetConfig {
  return {
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'none', scriptPath: 'none.json' } },
    profiles: { p: { version: '1', route: 'r', prompt: 'sessions test', budget: { maxActiveMinutes: 30 } } },
    caseTypes: { support: { rootProfile: 'p', scope: { reads: 'all', writes: [], forbidden: [] } } },
    principals: {
      acme: { tokenHash: tokenHash(TOKENS.acme), roles: ['customer'], customers: ['acme'] },
      // Sees acme's cases, operates none it does not control, cannot take over.
      ann: { tokenHash: tokenHash(TOKENS.ann), roles: ['support'], customers: ['acme'] },
      olga: { tokenHash: tokenHash(TOKENS.olga), roles: ['operator'] },
      oscar: { tokenHash: tokenHash(TOKENS.oscar), roles: ['operator'] },
    },
  };
}

const prefix = amqpPrefix('intake_sessions');
let drop: (() => Promise<void>) | undefined;
let db: Db;
let node: EverdictNode | undefined;
let url: string;

beforeAll(async () => {
  const database = await freshDatabase('intake_sessions');
  drop = database.drop;
  db = createPgDb(database.url, { max: 3 });
  const dir = mkdtempSync(join(tmpdir(), 'everdict-sessions-'));
  writeFileSync(join(dir, 'fleet.json'), JSON.stringify(fleet()));
  node = await startEverdictNode({
    services: ['intake'],
    port: await freePort(),
    env: { DATABASE_URL: database.url, AMQP_URL: TEST_AMQP_URL, EVERDICT_CONFIG: join(dir, 'fleet.json'), EVERDICT_AMQP_PREFIX: prefix },
  });
  url = node.url;
}, 120_000);

afterAll(async () => {
  await node?.stop();
  await db?.close();
  await deletePrefixTopology(prefix);
  await drop?.();
});

async function openCase(key: string): Promise<string> {
  const r = await call(url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'support', title: `session ${key}`, originKey: key } });
  expect(r.status).toBe(201);
  return r.body['caseId'] as string;
}

const ledgerOf = async (caseId: string, kind: string) =>
  (await db.query<{ body: Record<string, unknown> }>({ text: 'SELECT body FROM ledger WHERE case_id = $1::uuid AND kind = $2 ORDER BY seq', values: [caseId, kind] })).rows.map((r) => r.body);

function everdict(token: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, ['--conditions=source', '--import', 'tsx', 'cli/src/main.ts', ...args], { cwd: REPO, env: { ...process.env, EVERDICT_URL: url, EVERDICT_TOKEN: token }, timeout: 60_000 }, (err, stdout, stderr) =>
      done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const topUp = (token: string, caseId: string) => call(url, 'POST', `/v1/cases/${caseId}/top-up`, { token, body: { budget: { maxTurns: 5 } } });

describe('sessions: one controller at a time, takeover by an operator', () => {
  it('refuses a non-controller, hands over to an operator with a ledger record and a notification, then refuses the previous controller', async () => {
    const caseId = await openCase('handover-1');
    const fresh = await call(url, 'GET', `/v1/cases/${caseId}`, { token: TOKENS.ann });
    expect(fresh.body['session']).toMatchObject({ state: 'live', controller: null });

    // olga's first operator action makes her the controller.
    expect((await topUp(TOKENS.olga, caseId)).status).toBe(202);
    expect((await call(url, 'GET', `/v1/cases/${caseId}`, { token: TOKENS.acme })).body['session']).toMatchObject({ state: 'live', controller: 'olga' });
    expect(await ledgerOf(caseId, 'session_state')).toEqual([{ from: null, to: 'live', controller: 'olga', cause: 'first_operator_action' }]);

    // ann may view but not operate, nor take over.
    const refused = await call(url, 'POST', `/v1/cases/${caseId}/cancel`, { token: TOKENS.ann, body: { mode: 'hard' } });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: 'not_controller', controller: 'olga' });
    expect(await count(db, "SELECT 1 FROM ledger WHERE case_id = $1::uuid AND kind = 'case_cancel_requested'", [caseId])).toBe(0);
    expect((await db.query<{ stop_mode: string | null }>({ text: 'SELECT stop_mode FROM cases WHERE id = $1::uuid', values: [caseId] })).rows[0]!.stop_mode).toBeNull();
    expect((await topUp(TOKENS.ann, caseId)).status).toBe(403);
    const noRole = await call(url, 'POST', `/v1/cases/${caseId}/session/takeover`, { token: TOKENS.ann, body: { reason: 'I want it' } });
    expect(noRole.status).toBe(403);
    expect(noRole.body['error']).toBe('forbidden');
    expect(await ledgerOf(caseId, 'session_handover')).toEqual([]);

    // oscar (operator) takes over; olga is notified at commit.
    const notified: string[] = [];
    // A (re)connected listener wakes once with an empty payload; only real notifications count.
    const unlisten = await db.listen(SESSION_HANDOVER_CHANNEL, (p) => p !== '' && notified.push(p));
    try {
      expect((await call(url, 'POST', `/v1/cases/${caseId}/session/takeover`, { token: TOKENS.oscar, body: {} })).status).toBe(400);
      const taken = await call(url, 'POST', `/v1/cases/${caseId}/session/takeover`, { token: TOKENS.oscar, body: { reason: 'olga is off shift' } });
      expect(taken.status).toBe(200);
      expect(taken.body).toMatchObject({ caseId, handedOver: true, from: 'olga', session: { controller: 'oscar', state: 'live' } });
      await eventually(async () => notified.length > 0, { timeoutMs: 5000, what: 'handover notification' });
    } finally {
      await unlisten();
    }
    const handovers = await ledgerOf(caseId, 'session_handover');
    expect(handovers).toEqual([{ from: 'olga', to: 'oscar', reason: 'olga is off shift' }]);
    expect(JSON.parse(notified[0]!)).toMatchObject({ caseId, from: 'olga', to: 'oscar' });

    // olga's next action is refused, naming oscar; oscar stops and resumes the session.
    const olgaAgain = await call(url, 'POST', `/v1/cases/${caseId}/cancel`, { token: TOKENS.olga, body: { mode: 'soft' } });
    expect(olgaAgain.status).toBe(403);
    expect(olgaAgain.body).toMatchObject({ error: 'not_controller', controller: 'oscar' });
    expect((await call(url, 'POST', `/v1/cases/${caseId}/cancel`, { token: TOKENS.oscar, body: { mode: 'soft' } })).status).toBe(202);
    expect((await call(url, 'GET', `/v1/cases/${caseId}`, { token: TOKENS.ann })).body['session']).toMatchObject({ state: 'stopped', controller: 'oscar' });
    expect((await call(url, 'POST', `/v1/cases/${caseId}/resume`, { token: TOKENS.oscar, body: {} })).status).toBe(202);
    const shown = (await call(url, 'GET', `/v1/cases/${caseId}`, { token: TOKENS.ann })).body['session'] as Record<string, unknown>;
    expect(shown).toMatchObject({ state: 'resumed', controller: 'oscar' });
    expect(Number.isNaN(Date.parse(shown['since'] as string))).toBe(false);
    expect((await ledgerOf(caseId, 'session_state')).map((b) => [b['from'], b['to']])).toEqual([
      [null, 'live'],
      ['live', 'stopped'],
      ['stopped', 'resumed'],
    ]);
    // A takeover by the controller itself hands nothing over.
    const again = await call(url, 'POST', `/v1/cases/${caseId}/session/takeover`, { token: TOKENS.oscar, body: { reason: 'again' } });
    expect(again.body).toMatchObject({ handedOver: false });
    expect(await ledgerOf(caseId, 'session_handover')).toHaveLength(1);
    expect(node!.output()).not.toContain(TOKENS.oscar);
  });

  it('lets the customer act before any operator controls the case, and refuses it after', async () => {
    const caseId = await openCase('customer-1');
    expect((await call(url, 'POST', `/v1/cases/${caseId}/cancel`, { token: TOKENS.acme, body: { mode: 'soft' } })).status).toBe(202);
    expect((await call(url, 'GET', `/v1/cases/${caseId}`, { token: TOKENS.acme })).body['session']).toMatchObject({ state: 'stopped', controller: null });
    expect((await call(url, 'POST', `/v1/cases/${caseId}/resume`, { token: TOKENS.olga, body: {} })).status).toBe(202);
    expect((await call(url, 'GET', `/v1/cases/${caseId}`, { token: TOKENS.acme })).body['session']).toMatchObject({ state: 'resumed', controller: 'olga' });
    expect((await ledgerOf(caseId, 'session_state')).map((b) => [b['from'], b['to']])).toEqual([
      [null, 'stopped'],
      ['stopped', 'resumed'],
    ]);
    const refused = await call(url, 'POST', `/v1/cases/${caseId}/cancel`, { token: TOKENS.acme, body: { mode: 'hard' } });
    expect(refused.body).toMatchObject({ error: 'not_controller', controller: 'olga' });
    expect(refused.status).toBe(403);
  });

  it('takes over from the CLI (`everdict takeover`) and shows the session in `everdict case`', async () => {
    const caseId = await openCase('cli-1');
    expect((await topUp(TOKENS.olga, caseId)).status).toBe(202);
    expect((await everdict(TOKENS.oscar, 'takeover', caseId)).code).toBe(2);
    const denied = await everdict(TOKENS.ann, 'takeover', caseId, '--reason', 'mine now');
    expect(denied.code).not.toBe(0);
    const taken = await everdict(TOKENS.oscar, 'takeover', caseId, '--reason', 'escalated to tier 2');
    expect([taken.code, taken.stdout]).toEqual([0, expect.stringContaining('taken over from olga')]);
    const shown = await everdict(TOKENS.ann, 'case', caseId);
    expect(shown.stdout).toMatch(/session live {2}controller oscar {2}since \d{4}-/);
    expect(await ledgerOf(caseId, 'session_handover')).toEqual([{ from: 'olga', to: 'oscar', reason: 'escalated to tier 2' }]);
  }, 120_000);

  it('gives a case to exactly one of two principals acting first at once', async () => {
    for (let i = 0; i < 3; i++) {
      const caseId = await openCase(`race-${i}`);
      const replies = await Promise.all([topUp(TOKENS.olga, caseId), topUp(TOKENS.oscar, caseId)]);
      expect(replies.map((r) => r.status).sort()).toEqual([202, 403]);
      const winner = replies[0]!.status === 202 ? 'olga' : 'oscar';
      expect(replies.find((r) => r.status === 403)!.body['controller']).toBe(winner);
      expect(await ledgerOf(caseId, 'session_state')).toEqual([{ from: null, to: 'live', controller: winner, cause: 'first_operator_action' }]);
      expect(await count(db, "SELECT 1 FROM ledger WHERE case_id = $1::uuid AND kind = 'budget_top_up_requested'", [caseId])).toBe(1);
    }
  });
});
