/**
 * Operator commands over the ledger and one gate (issue 13 item 10), as real child processes
 * against a running intake + gate node: `verify` recomputes the chain and reports its head, so
 * a removed tail is visible (exit 1 when the head no longer matches; a lower head seq when the
 * head was rewound too); `ledger [--follow]`; `gate <id>` prints the whole packet; `revoke`;
 * `--version`.
 */
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, newId, sealPacket } from '@everdict/contracts';
import type { EffectPacket } from '@everdict/contracts';
import { PACKET_PAPER_SCHEMA, createPgDb, openGate } from '@everdict/store';
import { eventually } from '@everdict/testkit';
import { TOKENS, call, startFixture } from './helpers.js';
import type { IntakeFixture } from './helpers.js';

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
const CLI = ['--conditions=source', '--import', 'tsx', 'cli/src/main.ts'];
let f: IntakeFixture;
let caseId: string;
let rootTaskId: string;
const gateId = newId();
let digest: string;

function packetOf(caseId: string): EffectPacket {
  return {
    packetVersion: 1,
    caseId,
    planStepId: 'credit-acct-7',
    planRevision: 1,
    shapeVersion: '1',
    operation: { connector: 'billing', name: 'accounts.credit' },
    effectClass: 'payment',
    target: { connector: 'billing', system: 'billing', environment: 'test' },
    params: { accountId: 'acct-7', amountCents: 1000 },
    expectedCounts: {},
    preconditions: [],
    assertions: [],
    revert: { kind: 'manual', description: 'debit the same amount by hand' },
    impactKeys: ['billing:test:acct-7'],
    summary: 'credit acct-7 PACKET-7f3a',
  };
}

beforeAll(async () => {
  f = await startFixture('intake-cli-ledger');
  const opened = await call(f.url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'support', title: 'Refund for order 7', originKey: 'cli-ledger-1' } });
  caseId = opened.body['caseId'] as string;
  rootTaskId = opened.body['rootTaskId'] as string;
  const sealed = sealPacket(packetOf(caseId));
  digest = sealed.digest;
  await f.substrate.store.unitOfWork(async (uow) => {
    const paper = await uow.putPaper({ caseId, kind: 'artefact', name: `packets/${gateId}`, schemaId: PACKET_PAPER_SCHEMA, bytes: Buffer.from(canonicalJson(sealed), 'utf8') });
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
    await uow.appendLedger(caseId, { kind: 'test_note', body: { n: 1 } });
    await uow.appendLedger(caseId, { kind: 'test_note', body: { n: 2 } });
  });
});
afterAll(async () => {
  await f?.close();
});

function everdict(token: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [...CLI, ...args], { cwd: REPO, env: { ...process.env, EVERDICT_URL: f.url, EVERDICT_TOKEN: token }, timeout: 60_000 }, (err, stdout, stderr) =>
      done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

interface Verify {
  ok: boolean;
  records: number;
  problem?: { seq: number; reason: string };
  head: { seq: number; hash: string } | null;
}

/** An attacker who owns the database: the append-only triggers are off for this session only. */
async function asOwner(statements: { text: string; values?: unknown[] }[]): Promise<void> {
  const owner = createPgDb(f.databaseUrl, { max: 1 });
  try {
    await owner.transaction(async (tx) => {
      await tx.query({ text: 'SET LOCAL session_replication_role = replica' });
      for (const s of statements) await tx.query(s);
    });
  } finally {
    await owner.close();
  }
}

describe('everdict verify, ledger, gate, revoke, --version', () => {
  it('prints its version', async () => {
    const v = await everdict('', '--version');
    expect(v.code).toBe(0);
    expect(v.stdout.trim()).toBe(`everdict ${(JSON.parse(readFileSync(resolve(REPO, 'cli/package.json'), 'utf8')) as { version: string }).version}`);
  });

  it('verify reports the head; a removed tail fails it, and a rewound head shows a lower seq', async () => {
    const ok = await everdict(TOKENS.acme, 'verify', caseId, '--json');
    expect(ok.code).toBe(0);
    const before = JSON.parse(ok.stdout) as Verify;
    expect(before).toMatchObject({ ok: true, records: before.head!.seq });
    expect(before.head!.seq).toBeGreaterThanOrEqual(3);
    const last = await f.db.query<{ hash: string }>({ text: 'SELECT hash FROM ledger WHERE case_id = $1 AND seq = $2', values: [caseId, before.head!.seq] });
    expect(before.head!.hash).toBe(last.rows[0]!.hash);
    const human = await everdict(TOKENS.acme, 'verify', caseId);
    expect(human.stdout).toContain(`head seq ${before.head!.seq} ${before.head!.hash}`);
    // Another customer cannot verify it.
    expect((await everdict(TOKENS.globex, 'verify', caseId)).code).toBe(1);

    // The tail removed, the head left: the head no longer matches the chain.
    await asOwner([{ text: 'DELETE FROM ledger WHERE case_id = $1 AND seq = $2', values: [caseId, before.head!.seq] }]);
    const broken = await everdict(TOKENS.acme, 'verify', caseId, '--json');
    expect(broken.code).toBe(1);
    expect(JSON.parse(broken.stdout)).toMatchObject({ ok: false, problem: { reason: 'head_mismatch' }, head: before.head });
    expect((await everdict(TOKENS.acme, 'verify', caseId)).stdout).toContain('BROKEN');

    // The head rewound too: the chain verifies, but the head an operator kept is gone.
    const prev = await f.db.query<{ seq: number; hash: string }>({ text: 'SELECT seq::int AS seq, hash FROM ledger WHERE case_id = $1 ORDER BY seq DESC LIMIT 1', values: [caseId] });
    await asOwner([{ text: 'UPDATE ledger_heads SET seq = $2, hash = $3 WHERE case_id = $1', values: [caseId, prev.rows[0]!.seq, prev.rows[0]!.hash] }]);
    const rewound = JSON.parse((await everdict(TOKENS.acme, 'verify', caseId, '--json')).stdout) as Verify;
    expect(rewound.ok).toBe(true);
    expect(rewound.head!.seq).toBe(before.head!.seq - 1);
  });

  it('ledger prints every record; --follow prints records appended later', async () => {
    const all = await everdict(TOKENS.acme, 'ledger', caseId, '--json');
    expect(all.code).toBe(0);
    const lines = all.stdout.trim().split('\n').map((l) => JSON.parse(l) as { seq: number; kind: string });
    expect(lines.map((l) => l.seq)).toEqual(lines.map((_, i) => i + 1));
    expect(lines[0]!.kind).toBe('case_opened');

    const proc = spawn(process.execPath, [...CLI, 'ledger', caseId, '--follow', '--interval-ms', '200'], { cwd: REPO, env: { ...process.env, EVERDICT_URL: f.url, EVERDICT_TOKEN: TOKENS.acme }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    try {
      await eventually(async () => out.includes('test_note'), { timeoutMs: 30_000, what: 'the existing records printed' });
      await f.substrate.store.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'followed_note', body: { marker: 'FOLLOW-91' } }));
      await eventually(async () => out.includes('FOLLOW-91'), { timeoutMs: 15_000, what: 'the new record printed' });
      proc.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(out.split('\n').filter((l) => l.includes('FOLLOW-91'))).toHaveLength(1);
    } finally {
      if (proc.exitCode === null) proc.kill('SIGKILL');
    }
  });

  it('gate prints the whole packet; revoke closes the gate', async () => {
    const g = await everdict(TOKENS.olga, 'gate', gateId);
    expect(g.code).toBe(0);
    expect(g.stdout).toContain(`gate ${gateId}  open`);
    expect(g.stdout).toContain('PACKET-7f3a');
    expect(g.stdout).toContain('"amountCents": 1000');
    const denied = await everdict(TOKENS.acme, 'revoke', gateId);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toMatch(/role_required.*HTTP 403/);
    const r = await everdict(TOKENS.olga, 'revoke', gateId, '--reason', 'wrong account');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`gate ${gateId} revoked`);
    const state = (await f.db.query<{ state: string }>({ text: 'SELECT state FROM gates WHERE id = $1', values: [gateId] })).rows[0]!.state;
    expect(state).toBe('revoked');
  });
});
