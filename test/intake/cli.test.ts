/**
 * The operator CLI (`everdict cases|case|gates|decide|answer|cancel|fleet`) as a real child
 * process against a running intake + gate node: human output by default, JSON with --json,
 * server-side refusals surfaced with a non-zero exit.
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { PACKET_PAPER_SCHEMA, openGate } from '@everdict/store';
import { TOKENS, call, startFixture } from './helpers.js';
import type { IntakeFixture } from './helpers.js';

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
let f: IntakeFixture;
let caseId: string;
let rootTaskId: string;
const gateId = newId();
const digest = `sha256:${'ab'.repeat(32)}`;

beforeAll(async () => {
  f = await startFixture('intake-cli');
  const opened = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'support', title: 'Refund for order 99', originKey: 'cli-1' } });
  caseId = opened.body['caseId'] as string;
  rootTaskId = opened.body['rootTaskId'] as string;
  // The gate's packet paper is a stand-in: the CLI shows gates, it does not judge packets.
  await f.substrate.store.unitOfWork(async (uow) => {
    const paper = await uow.putPaper({ caseId, kind: 'artefact', name: `packets/${gateId}`, schemaId: PACKET_PAPER_SCHEMA, bytes: Buffer.from('{}', 'utf8') });
    await openGate(uow, {
      id: gateId,
      caseId,
      taskId: rootTaskId,
      packetDigest: digest,
      operation: 'billing.accounts.credit',
      effectClass: 'payment',
      requiredDecisions: [{ decision: 'HW-payment', role: 'finance' }],
      state: 'open',
      expiresAt: null,
      ttlMs: 3_600_000,
      packetPaperId: paper.paperId,
      packetRevision: paper.revision,
      mutationKey: null,
      proposeCallId: null,
      impactKeys: [],
      summary: 'credit 10 EUR',
      reason: null,
    });
  });
});
afterAll(async () => {
  await f?.close();
});

function everdict(token: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'cli/src/main.ts', ...args],
      { cwd: REPO, env: { ...process.env, EVERDICT_URL: f.url, EVERDICT_TOKEN: token }, timeout: 60_000 },
      (err, stdout, stderr) => done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('everdict operator commands', () => {
  it('lists and shows cases (human and --json), refuses another customer, needs a token', async () => {
    const [list, show, json, foreign, noToken] = await Promise.all([
      everdict(TOKENS.acme, 'cases'),
      everdict(TOKENS.acme, 'case', caseId),
      everdict(TOKENS.acme, 'case', caseId, '--json'),
      everdict(TOKENS.globex, 'case', caseId),
      everdict('', 'cases'),
    ]);
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toContain('EVERDICT_TOKEN');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^CASE\s+TYPE\s+STATE/);
    expect(list.stdout).toContain(caseId);
    expect(show.stdout).toContain(`case ${caseId}  open`);
    expect(show.stdout).toContain(rootTaskId);
    expect(show.stdout).toContain(gateId);
    expect((JSON.parse(json.stdout) as { caseId: string }).caseId).toBe(caseId);
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toContain('case_not_found');
    expect(foreign.stderr).not.toContain(TOKENS.globex);
  });

  it('gates and decide go through the gate API: no role → refused, role holder → approved', async () => {
    const [gates, denied] = await Promise.all([
      everdict(TOKENS.olga, 'gates'),
      everdict(TOKENS.acme, 'decide', gateId, '--decision', 'HW-payment', '--verdict', 'approve', '--digest', digest),
    ]);
    expect(gates.stdout).toContain(`gate ${gateId}  open`);
    expect(gates.stdout).toContain('HW-payment (role finance): yours to decide');
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/role_required.*HTTP 403/);
    const ok = await everdict(TOKENS.olga, 'decide', gateId, '--decision', 'HW-payment', '--verdict', 'approve', '--digest', digest, '--json');
    expect(ok.code).toBe(0);
    const state = (await f.db.query<{ state: string }>({ text: 'SELECT state FROM gates WHERE id = $1', values: [gateId] })).rows[0]!.state;
    expect(state).toBe('approved');
  });

  it('answer, cancel and fleet', async () => {
    const questionId = newId();
    await f.db.query({ text: "INSERT INTO questions (id, case_id, task_id, gap, decision_needed) VALUES ($1, $2, $3, 'which account?', 'account')", values: [questionId, caseId, rootTaskId] });
    const [answer, fleet] = await Promise.all([everdict(TOKENS.acme, 'answer', questionId, 'account', '7'), everdict(TOKENS.olga, 'fleet')]);
    expect(answer.code).toBe(0);
    expect(answer.stdout).toContain(`answer sent for question ${questionId}`);
    const sent = (await f.db.query<{ body: Buffer }>({ text: "SELECT body FROM outbox_messages WHERE case_id = $1 AND type = 'question.answered'", values: [caseId] })).rows;
    expect(sent.map((r) => (JSON.parse(r.body.toString('utf8')) as { payload: { answer: string } }).payload.answer)).toEqual(['account 7']);
    expect(fleet.code).toBe(0);
    expect(fleet.stdout).toMatch(/tasks: .*open=\d+/);
    expect(fleet.stdout).toContain(`${f.prefix}.turn-worker`);

    const cancel = await everdict(TOKENS.acme, 'cancel', caseId, '--mode', 'soft');
    expect(cancel.code).toBe(0);
    expect(cancel.stdout).toContain('stop mode soft');
    expect(await f.db.query({ text: "SELECT 1 FROM outbox_messages WHERE case_id = $1 AND type = 'task.cancel'", values: [caseId] }).then((r) => r.rowCount)).toBe(1);
  });

});
