/**
 * Acceptance: a worker stopped (SIGSTOP) past its lease loses the task to another
 * worker; when it is continued (SIGCONT) its writes are refused — StaleFence, counted in
 * everdict_store_stale_fence_total — and nothing it produced lands. The read is observed through
 * the workers' tool trace (LOG_LEVEL=debug, `tool started` lines on stdout, written when it runs).
 * It is a slow knowledge-base read over MCP (stdio): observable, so its intent is journalled
 * before it runs and both workers run it under that one call id.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordStream, toolTrace } from '@everdict/testkit';
import { call, eventually, REPO, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc } from './helpers.js';

describe('a stalled worker past its lease', () => {
  let fx: TurnsFixture;
  /** A worker tracing its tool calls, and the `tool started` lines it wrote for `taskId` so far. */
  const traced = async (name: string) => {
    const w: WorkerProc = await fx.worker(name, { LOG_LEVEL: 'debug' });
    const out = recordStream(w.proc.stdout!, w.output());
    return { w, starts: (taskId: string) => toolTrace(out()).filter((e) => e.event === 'started' && e.taskId === taskId) };
  };
  beforeAll(async () => {
    fx = await turnsFixture('turns_stale', {
      ...testConfig({
        routes: { main: 'main.json' },
        tools: {},
        profiles: { agent: { version: '1', route: 'main', prompt: 'You answer tickets.', mcp: [{ server: 'kb', tools: { lookup: { access: 'read' } } }] } },
        runtime: { leaseTtlMs: 1000, sweepIntervalMs: 200 },
      }),
      mcpServers: { kb: { transport: 'stdio', command: process.execPath, args: [join(REPO, 'test/turns/fixtures/kb-mcp.mjs'), '2500'], timeoutMs: 30_000 } },
    });
    fx.writeScript('main', [call(['kb__lookup', { page: 1 }]), say('resolved')]);
  });
  afterAll(async () => fx?.close());

  it('refuses the stale worker’s writes after another worker took over', async () => {
    const { w: stale, starts: staleStarts } = await traced('stale');
    const { caseId, taskId } = await fx.openCase('ticket', 'a slow ticket');
    // The stale worker is inside the tool call (its response and tool intent are committed).
    await eventually(() => staleStarts(taskId).length === 1, { what: 'tool started' });
    const claimed = (await fx.rows<{ fence_epoch: number; lease_owner: string }>('SELECT fence_epoch, lease_owner FROM tasks WHERE id = $1', [taskId]))[0]!;
    expect(claimed.lease_owner).toMatch(/^stale:/);
    stale.signal('SIGSTOP');
    let freshStarts: typeof staleStarts;
    try {
      const fresh = await traced('fresh');
      freshStarts = fresh.starts;
      await eventually(async () => (await fx.rows<{ state: string }>('SELECT state FROM tasks WHERE id = $1', [taskId]))[0]!.state === 'done', { timeoutMs: 20_000, what: 'the fresh worker finished the task' }).catch((e: unknown) => {
        throw new Error(`${String(e)}\n${fresh.w.output().slice(-3000)}`);
      });
      const after = (await fx.rows<{ fence_epoch: number }>('SELECT fence_epoch FROM tasks WHERE id = $1', [taskId]))[0]!;
      expect(after.fence_epoch).toBe(claimed.fence_epoch + 1);
    } finally {
      stale.signal('SIGCONT');
    }
    // The stale worker wakes up, finishes its tool call and tries to commit: refused and counted.
    await eventually(async () => (await stale.metric('everdict_store_stale_fence_total', { operation: 'write_journal' })) > 0, { timeoutMs: 15_000, what: 'stale journal write counted' }).catch(
      async (e: unknown) => {
        throw new Error(`${String(e)}\n${await (await fetch(`http://127.0.0.1:${stale.port}/metrics`)).text().then((t) => t.split('\n').filter((l) => l.includes('stale')).join('\n'))}\n${stale.output().slice(-3000)}`);
      },
    );
    await new Promise((r) => setTimeout(r, 500));

    // Nothing of the stale epoch landed after the takeover: every checkpoint and ledger turn
    // record is the new holder's; the turn's outcome was completed once, by the new holder.
    const cps = await fx.rows<{ turn: number; fence_epoch: number }>('SELECT turn, fence_epoch FROM turn_checkpoints WHERE task_id = $1 ORDER BY turn', [taskId]);
    expect(cps).toEqual([
      { turn: 1, fence_epoch: claimed.fence_epoch + 1 },
      { turn: 2, fence_epoch: claimed.fence_epoch + 1 },
    ]);
    const turns = await fx.rows<{ body: { epoch: number } }>("SELECT body FROM ledger WHERE case_id = $1 AND kind = 'turn'", [caseId]);
    expect(turns.map((t) => t.body.epoch)).toEqual([claimed.fence_epoch + 1, claimed.fence_epoch + 1]);
    expect((await fx.rows<{ state: string }>('SELECT state FROM tasks WHERE id = $1', [taskId]))[0]!.state).toBe('done');
    // The read ran twice (the stale run never completed it), once per worker, under the same call id.
    const reads = [...staleStarts(taskId), ...freshStarts(taskId)];
    expect(staleStarts(taskId)).toHaveLength(1);
    expect(freshStarts(taskId)).toHaveLength(1);
    expect(new Set(reads.map((r) => r.callId)).size).toBe(1);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  }, 90_000);
});
