/**
 * Refusals leave a trace (K8; a no-op control action still records what was checked), on a real
 * turn-worker process: every call the kernel withholds — a literal call of a tool that is not
 * offered, a declared read outside the case type's scope.reads, a tool in scope.forbidden, a call
 * shadow mode captures — is a RUNTIME_CALLS row settled `refused` / `shadowed` whose response
 * paper carries the refusal the model was told, is listed with its refusal in the turn's ledger
 * record, and never runs; the ledger verifies and the task still completes. Withheld rows travel
 * in the turn's own writes: a turn whose only calls are withheld commits once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KERNEL_REFUSALS } from '@everdict/contracts';
import type { KernelRefusal } from '@everdict/contracts';
import { readinessBudgetMs } from '@everdict/testkit';
import { call, eventually, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc } from './helpers.js';

interface Row {
  turn: number;
  ordinal: number;
  kind: string;
  tool_name: string;
  status: string;
  settled: boolean;
  response: string;
}

interface LedgerCall {
  ordinal: number;
  callId: string;
  name: string;
  status: string;
  refusal?: string;
}

describe('withheld calls are journal rows and ledger entries', () => {
  let fx: TurnsFixture;
  let w: WorkerProc;
  beforeAll(async () => {
    fx = await turnsFixture(
      'turns_refusals',
      testConfig({
        routes: { main: 'main.json', shadow: 'shadow.json' },
        tools: {
          lookup: { builtin: 'static', description: 'Look something up in the knowledge base.', output: 'found: the answer is 42' },
          search: { builtin: 'static', description: 'Search the archive.', output: 'archive: nothing' },
          vault: { builtin: 'static', description: 'Read the vault.', output: 'vault: the combination' },
        },
        profiles: {
          agent: { version: '1', route: 'main', prompt: 'You answer tickets.', tools: ['lookup', 'search', 'vault'] },
          shadowy: { version: '1', route: 'shadow', prompt: 'You answer tickets in shadow.', tools: ['lookup', 'search'] },
        },
        caseTypes: {
          ticket: { rootProfile: 'agent', scope: { reads: ['lookup', 'vault'], writes: [], forbidden: ['vault'] } },
          rehearsal: { rootProfile: 'shadowy', scope: { reads: 'all', writes: [], forbidden: [] }, shadow: ['lookup'] },
        },
      }),
    );
    fx.writeScript('main', [
      // search is a declared read outside scope.reads; vault is in scope.forbidden.
      call(['lookup', { q: 'a' }], ['search', { q: 'b' }], ['vault', {}]),
      // drop_database is not offered at all: the model names it literally.
      call(['drop_database', { really: true }]),
      say('done'),
    ]);
    fx.writeScript('shadow', [call(['lookup', { q: 'a' }], ['search', { q: 'b' }]), say('rehearsed')]);
    w = await fx.worker('refusals');
  }, 30_000 + readinessBudgetMs());
  afterAll(async () => fx?.close());

  const done = (taskId: string) =>
    eventually(async () => (await fx.rows<{ state: string }>('SELECT state FROM tasks WHERE id = $1', [taskId]))[0]?.state === 'done', { timeoutMs: 20_000, what: 'task done' });
  const toolRows = (taskId: string) =>
    fx.rows<Row>(
      `SELECT c.turn, c.ordinal, c.kind, c.tool_name, c.status, c.completed_at IS NOT NULL AS settled, convert_from(r.bytes, 'UTF8') AS response
         FROM runtime_calls c
         JOIN papers p ON p.id = c.response_paper_id
         JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
        WHERE c.task_id = $1 AND c.ordinal > 0 ORDER BY c.turn, c.ordinal`,
      [taskId],
    );
  const ledgerCalls = async (caseId: string) =>
    (await fx.rows<{ body: { turn: number; calls: LedgerCall[] } }>(`SELECT body FROM ledger WHERE case_id = $1 AND kind = 'turn' ORDER BY seq`, [caseId])).flatMap((r) =>
      r.body.calls.filter((c) => c.ordinal > 0).map((c) => ({ turn: r.body.turn, ...c })),
    );
  const refusalIn = (row: Row) => (JSON.parse(row.response) as { refusal: KernelRefusal | null; content: string; outcome: string });

  it('an unoffered tool, an out-of-scope read and a forbidden tool are `refused` rows, in the ledger with their refusals; the task completes', async () => {
    const commitsBefore = await w.metric('everdict_turn_commits_total');
    const { caseId, taskId } = await fx.openCase('ticket', 'answer the ticket');
    await done(taskId);

    const rows = await toolRows(taskId);
    expect(rows.map((r) => [r.turn, r.ordinal, r.tool_name, r.status, r.settled])).toEqual([
      [0, 1, 'lookup', 'completed', true],
      [0, 2, 'search', 'refused', true],
      [0, 3, 'vault', 'refused', true],
      [1, 1, 'drop_database', 'refused', true],
    ]);
    // A name the registry does not hold reached only the kernel.
    expect(rows[3]!.kind).toBe('control');
    const expected: [number, KernelRefusal][] = [
      [1, 'read_out_of_scope'],
      [2, 'forbidden'],
      [3, 'unregistered_tool'],
    ];
    for (const [i, code] of expected) {
      const paper = refusalIn(rows[i]!);
      expect(paper.refusal).toBe(code);
      expect(paper.content.startsWith(KERNEL_REFUSALS[code])).toBe(true);
    }
    // The refusal the paper records is the one the model was told (the next request's tool message).
    const [nextRequest] = await fx.rows<{ request: string }>(
      `SELECT convert_from(paper_document(r.paper_id, r.revision), 'UTF8') AS request FROM runtime_calls c JOIN papers p ON p.id = c.request_paper_id
         JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE c.task_id = $1 AND c.turn = 2 AND c.ordinal = 0`,
      [taskId],
    );
    const told = (JSON.parse(nextRequest!.request) as { request: { messages: { role: string; content: string }[] } }).request.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    expect(told).toEqual(rows.map((r) => refusalIn(r).content));

    const listed = await ledgerCalls(caseId);
    expect(listed.map((c) => [c.turn, c.ordinal, c.name, c.status, c.refusal ?? null])).toEqual([
      [0, 1, 'lookup', 'completed', null],
      [0, 2, 'search', 'refused', 'read_out_of_scope'],
      [0, 3, 'vault', 'refused', 'forbidden'],
      [1, 1, 'drop_database', 'refused', 'unregistered_tool'],
    ]);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });

    // Commits (the claim writes turn 0's model intent; each turn's write carries the next one's):
    // turn 0 = its turn write alone — lookup is a built-in in-process read, so its batch is
    // folded (durability.ts) and its row is inserted settled with the two refusals; turn 1,
    // whose only call is withheld = its turn write; turn 2 = its turn write.
    expect((await w.metric('everdict_turn_commits_total')) - commitsBefore).toBe(3);
  });

  it('a call shadow mode captures is a `shadowed` row, in the ledger with shadow_denied; the task completes', async () => {
    const { caseId, taskId } = await fx.openCase('rehearsal', 'rehearse the ticket');
    await done(taskId);
    const rows = await toolRows(taskId);
    expect(rows.map((r) => [r.ordinal, r.tool_name, r.status])).toEqual([
      [1, 'lookup', 'completed'],
      [2, 'search', 'shadowed'],
    ]);
    expect(refusalIn(rows[1]!)).toMatchObject({ refusal: 'shadow_denied', outcome: 'shadow_denied' });
    expect(refusalIn(rows[1]!).content.startsWith(KERNEL_REFUSALS.shadow_denied)).toBe(true);
    expect((await ledgerCalls(caseId)).map((c) => [c.name, c.status, c.refusal ?? null])).toEqual([
      ['lookup', 'completed', null],
      ['search', 'shadowed', 'shadow_denied'],
    ]);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });
});
