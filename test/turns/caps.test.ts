/**
 * Acceptance (issue 13 item 5, seed 004 §11.5): a case type's caps.workerSlots bounds how many
 * tasks of one case run at once across worker processes. A root with workerSlots 1 spawns three
 * children on two real workers: a claim beyond the cap parks the task `capacity` (it waits, it
 * is never failed), the backoff retries it, and every task finishes — while at no moment do two
 * tasks of the case hold a lease. Every entry into and exit from `running` is recorded by a
 * trigger on the database clock, so an overlap of any length shows up.
 *
 * caps.externalCallsPerMinute: a case allowed 2 external calls a minute makes 4 connector reads
 * of a real HTTP target in one turn. Two run; the next parks the task `capacity` until the
 * minute since the first has passed, then the other two run under their call ids.
 * The target sees each read exactly once, the task is done, never failed.
 *
 * caps.modelCalls: a root with modelCalls 1 spawns three children on two workers, against a real
 * OpenAI-compatible provider that answers slowly and counts the requests it is serving at once:
 * it never serves two of the case at a time, and every task finishes.
 *
 * caps.estateSessions: a case allowed 2 sessions per estate target makes 4 independent reads of
 * a real HTTP target that answers slowly and counts the requests open at once: at most 2 are,
 * at least once 2 are (the reads do run side by side), each read reaches the target once.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@everdict/testkit';
import { call, eventually, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc } from './helpers.js';

interface Span {
  task_id: string;
  started: Date;
  ended: Date | null;
}

describe('per-case caps: worker slots', () => {
  let fx: TurnsFixture;
  let workers: WorkerProc[] = [];
  beforeAll(async () => {
    fx = await turnsFixture(
      'turns_caps',
      testConfig({
        routes: { lead: 'lead.json', helper: 'helper.json' },
        tools: { slow: { builtin: 'static', description: 'Check something slowly.', output: 'checked: fine', delayMs: 1200 } },
        profiles: {
          lead: { version: '1', route: 'lead', prompt: 'You lead the case.', tools: ['slow'], childProfile: 'helper' },
          helper: { version: '1', route: 'helper', prompt: 'You help the lead.', tools: ['slow'] },
        },
        caseTypes: {
          capped: { rootProfile: 'lead', scope: { reads: 'all', writes: [], forbidden: [] }, caps: { workerSlots: 1 } },
        },
      }),
    );
    fx.writeScript('lead', [
      call(['spawn', { objective: 'check A' }], ['spawn', { objective: 'check B' }], ['spawn', { objective: 'check C' }]),
      call(['wait', { for: 'children', reason: 'the three checks' }]),
      say('all done'),
    ]);
    fx.writeScript('helper', [call(['slow', { q: 'it' }]), say('it is fine')]);
    // Observation only: each lease a task takes and gives back, stamped on the database clock
    // inside the transition's own transaction.
    await fx.rows(`CREATE TABLE test_running_spans (task_id uuid NOT NULL, case_id uuid NOT NULL, started timestamptz NOT NULL, ended timestamptz)`);
    await fx.rows(`CREATE TABLE test_parks (task_id uuid NOT NULL, reason text NOT NULL, detail jsonb)`);
    await fx.rows(`CREATE FUNCTION test_track_running() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF OLD.state = 'running' AND (NEW.state <> 'running' OR NEW.fence_epoch <> OLD.fence_epoch) THEN
          UPDATE test_running_spans SET ended = clock_timestamp() WHERE task_id = OLD.id AND ended IS NULL;
        END IF;
        IF NEW.state = 'running' AND (OLD.state <> 'running' OR NEW.fence_epoch <> OLD.fence_epoch) THEN
          INSERT INTO test_running_spans VALUES (NEW.id, NEW.case_id, clock_timestamp(), NULL);
        END IF;
        IF NEW.state = 'parked' AND OLD.state <> 'parked' THEN
          INSERT INTO test_parks VALUES (NEW.id, NEW.park_reason, NEW.park_detail);
        END IF;
        RETURN NEW;
      END $$`);
    await fx.rows(`CREATE TRIGGER test_track_running AFTER UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION test_track_running()`);
    workers = await Promise.all([fx.worker('k1'), fx.worker('k2')]);
  });
  afterAll(async () => fx?.close());

  const logs = () => workers.map((w) => w.output().slice(-3000)).join('\n----\n');

  it('runs at most one task of the case at a time; the others wait parked, and all finish', async () => {
    const root = await fx.openCase('capped', 'check A, B and C');
    await eventually(async () => (await fx.rows<{ state: string }>('SELECT state FROM tasks WHERE id = $1', [root.taskId]))[0]?.state === 'done', {
      timeoutMs: 60_000,
      what: 'the root finished',
    }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${logs()}`);
    });

    const tasks = await fx.rows<{ id: string; state: string }>('SELECT id, state FROM tasks WHERE case_id = $1', [root.caseId]);
    expect(tasks).toHaveLength(4);
    for (const t of tasks) expect(t.state).toBe('done');

    // Never two leases of the case at once: sorted by start, each span ends before the next starts.
    const spans = await fx.rows<Span>('SELECT task_id, started, ended FROM test_running_spans WHERE case_id = $1 ORDER BY started', [root.caseId]);
    expect(spans.length).toBeGreaterThanOrEqual(4);
    for (const s of spans) expect(s.ended, `span of ${s.task_id} ended`).not.toBeNull();
    for (let i = 1; i < spans.length; i++) {
      const prev = spans[i - 1]!;
      const next = spans[i]!;
      expect(next.started.getTime(), `${next.task_id} started while ${prev.task_id} ran`).toBeGreaterThanOrEqual(prev.ended!.getTime());
    }

    // The children competed for the one slot: claims beyond it parked `capacity`, nothing failed.
    const parks = await fx.rows<{ task_id: string; reason: string; detail: { cap?: string; limit?: number } }>('SELECT task_id, reason, detail FROM test_parks');
    const capacity = parks.filter((p) => p.reason === 'capacity');
    expect(capacity.length).toBeGreaterThan(0);
    for (const p of capacity) expect(p.detail).toMatchObject({ cap: 'workerSlots', limit: 1 });
    const failed = await fx.rows('SELECT 1 FROM tasks WHERE case_id = $1 AND state = $2', [root.caseId, 'failed']);
    expect(failed).toHaveLength(0);
  });
});

describe('per-case caps: external calls per minute', () => {
  let fx: TurnsFixture;
  let workers: WorkerProc[] = [];
  let target: http.Server;
  const seen: { id: string; at: number }[] = [];
  beforeAll(async () => {
    const port = await freePort();
    target = http.createServer((req, res) => {
      const id = /\/items\/([a-z0-9-]+)$/.exec(req.url ?? '')?.[1] ?? '?';
      seen.push({ id, at: Date.now() });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id, ok: true }));
    });
    await new Promise<void>((r) => target.listen(port, '127.0.0.1', () => r()));
    const config = testConfig({
      routes: { reader: 'reader.json' },
      tools: {},
      profiles: { reader: { version: '1', route: 'reader', prompt: 'You read items.', reads: ['shop/items.get'] } },
      caseTypes: {
        rated: { rootProfile: 'reader', scope: { reads: ['shop'], writes: [], forbidden: [] }, caps: { externalCallsPerMinute: 2 } },
      },
    });
    config.connectors = {
      shop: {
        kind: 'http',
        target: { system: 'shop', environment: 'test' },
        baseUrl: `http://127.0.0.1:${port}/api`,
        timeoutMs: 3000,
        receipts: { path: '/receipts/{idempotencyKey}', conclusive: false },
        operations: { 'items.get': { access: 'read', method: 'GET', path: '/items/{id}', params: { id: { type: 'string', maxLength: 32 } } } },
      },
    };
    fx = await turnsFixture('turns_caps_rate', config);
    fx.writeScript('reader', [
      call(['shop__items_get', { id: 'r1' }], ['shop__items_get', { id: 'r2' }], ['shop__items_get', { id: 'r3' }], ['shop__items_get', { id: 'r4' }]),
      say('four items read'),
    ]);
    workers = [await fx.worker('rate1')];
  });
  afterAll(async () => {
    await fx?.close();
    target?.closeAllConnections();
    await new Promise<void>((r) => (target ? target.close(() => r()) : r()));
  });

  const logs = () => workers.map((w) => w.output().slice(-3000)).join('\n----\n');
  const task = async (id: string) => (await fx.rows<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null }>('SELECT state, park_reason, park_detail FROM tasks WHERE id = $1', [id]))[0]!;

  it('parks the third call until the window allows, then completes every read once', async () => {
    const { taskId } = await fx.openCase('rated', 'read four items');
    const parked = await eventually(async () => {
      const t = await task(taskId);
      return t.park_reason === 'capacity' ? t : undefined;
    }, { timeoutMs: 20_000, what: 'the task parked at its call-rate cap' }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${logs()}`);
    });
    expect(parked.park_detail).toMatchObject({ cap: 'externalCallsPerMinute', limit: 2 });
    // The target declares these reads independent, so they run side by side: which two of the
    // four got the minute's places is a race; that exactly two did is not.
    const first = seen.map((s) => s.id);
    expect(first).toHaveLength(2);

    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 90_000, intervalMs: 500, what: 'the task finished' }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${logs()}`);
    });
    // Each read reached the target exactly once; the later two only a minute after the first two.
    expect(seen.map((s) => s.id).sort()).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(seen.slice(0, 2).map((s) => s.id)).toEqual(first);
    expect(seen[2]!.at - seen[0]!.at).toBeGreaterThanOrEqual(59_000);
    const calls = await fx.rows<{ tool_name: string; status: string }>("SELECT tool_name, status FROM runtime_calls WHERE task_id = $1 AND kind = 'read' ORDER BY turn, ordinal", [taskId]);
    expect(calls).toEqual(Array.from({ length: 4 }, () => ({ tool_name: 'shop__items_get', status: 'completed' })));
    expect((await task(taskId)).state).toBe('done');
  }, 120_000);
});

/** A real HTTP server that answers after `delayMs` and records how many requests it serves at once. */
async function countingServer(delayMs: number, answer: (body: string, url: string) => unknown): Promise<{ url: string; max: () => number; served: string[]; close(): Promise<void> }> {
  let open = 0;
  let max = 0;
  const served: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      open++;
      max = Math.max(max, open);
      const body = Buffer.concat(chunks).toString('utf8');
      served.push(req.url ?? '');
      setTimeout(() => {
        open--;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer(body, req.url ?? '')));
      }, delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    max: () => max,
    served,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** An OpenAI-compatible completion: tool calls, or text. */
function completion(out: { tools?: [string, Record<string, unknown>][]; text?: string }) {
  const message = out.tools
    ? { role: 'assistant', content: null, tool_calls: out.tools.map(([name, args], i) => ({ id: `call_${i}_${Math.random().toString(36).slice(2)}`, type: 'function', function: { name, arguments: JSON.stringify(args) } })) }
    : { role: 'assistant', content: out.text ?? '' };
  return { id: 'cmpl', object: 'chat.completion', model: 'm', choices: [{ index: 0, message, finish_reason: out.tools ? 'tool_calls' : 'stop' }], usage: { prompt_tokens: 10, completion_tokens: 2 } };
}

describe('per-case caps: concurrent model calls', () => {
  let fx: TurnsFixture;
  let workers: WorkerProc[] = [];
  let provider: Awaited<ReturnType<typeof countingServer>>;
  let leadAsks = 0;
  beforeAll(async () => {
    provider = await countingServer(700, (body) => {
      const req = JSON.parse(body) as { model: string };
      if (req.model !== 'lead-model') return completion({ text: 'checked: fine' });
      leadAsks++;
      if (leadAsks === 1) return completion({ tools: [['spawn', { objective: 'check A' }], ['spawn', { objective: 'check B' }], ['spawn', { objective: 'check C' }]] });
      if (leadAsks === 2) return completion({ tools: [['wait', { for: 'children', reason: 'the three checks' }]] });
      return completion({ text: 'all done' });
    });
    const config = testConfig({
      routes: { lead: 'unused.json', helper: 'unused.json' },
      profiles: {
        lead: { version: '1', route: 'lead', prompt: 'You lead the case.', tools: ['lookup'], childProfile: 'helper' },
        helper: { version: '1', route: 'helper', prompt: 'You help the lead.', tools: ['lookup'] },
      },
      caseTypes: { thrifty: { rootProfile: 'lead', scope: { reads: 'all', writes: [], forbidden: [] }, caps: { modelCalls: 1 } } },
    });
    config.routes = {
      lead: { adapter: 'openai', model: 'lead-model', baseUrl: `${provider.url}/v1` },
      helper: { adapter: 'openai', model: 'helper-model', baseUrl: `${provider.url}/v1` },
    };
    fx = await turnsFixture('turns_caps_model', config);
    workers = await Promise.all([fx.worker('m1'), fx.worker('m2')]);
  });
  afterAll(async () => {
    await fx?.close();
    await provider?.close();
  });

  it('never has two model calls of the case in flight, and every task finishes', async () => {
    const root = await fx.openCase('thrifty', 'check A, B and C');
    await eventually(async () => (await fx.rows<{ state: string }>('SELECT state FROM tasks WHERE id = $1', [root.taskId]))[0]?.state === 'done', {
      timeoutMs: 60_000,
      what: 'the root finished',
    }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${workers.map((w) => w.output().slice(-3000)).join('\n----\n')}`);
    });
    const tasks = await fx.rows<{ state: string }>('SELECT state FROM tasks WHERE case_id = $1', [root.caseId]);
    expect(tasks.map((t) => t.state)).toEqual(['done', 'done', 'done', 'done']);
    // Three lead asks and one per child reached the provider, one at a time.
    expect(provider.served.length).toBeGreaterThanOrEqual(6);
    expect(provider.max()).toBe(1);
    // Nothing is left holding a place once the case is done.
    expect(await fx.rows('SELECT 1 FROM case_cap_holds WHERE case_id = $1', [root.caseId])).toHaveLength(0);
  }, 90_000);
});

describe('per-case caps: sessions per estate target', () => {
  let fx: TurnsFixture;
  let workers: WorkerProc[] = [];
  let target: Awaited<ReturnType<typeof countingServer>>;
  beforeAll(async () => {
    target = await countingServer(600, (_body, url) => ({ id: /\/items\/([a-z0-9-]+)$/.exec(url)?.[1] ?? '?', ok: true }));
    const config = testConfig({
      routes: { reader: 'reader.json' },
      tools: {},
      profiles: { reader: { version: '1', route: 'reader', prompt: 'You read items.', reads: ['shop/items.get'] } },
      caseTypes: { pooled: { rootProfile: 'reader', scope: { reads: ['shop'], writes: [], forbidden: [] }, caps: { estateSessions: 2 } } },
    });
    config.connectors = {
      shop: {
        kind: 'http',
        target: { system: 'shop', environment: 'test' },
        baseUrl: `${target.url}/api`,
        timeoutMs: 5000,
        receipts: { path: '/receipts/{idempotencyKey}', conclusive: false },
        operations: { 'items.get': { access: 'read', method: 'GET', path: '/items/{id}', params: { id: { type: 'string', maxLength: 32 } } } },
      },
    };
    fx = await turnsFixture('turns_caps_sessions', config);
    fx.writeScript('reader', [
      call(['shop__items_get', { id: 's1' }], ['shop__items_get', { id: 's2' }], ['shop__items_get', { id: 's3' }], ['shop__items_get', { id: 's4' }]),
      say('four items read'),
    ]);
    workers = [await fx.worker('sess1')];
  });
  afterAll(async () => {
    await fx?.close();
    await target?.close();
  });

  it('keeps at most two sessions open on the target; the others queue and every read runs once', async () => {
    const { taskId, caseId } = await fx.openCase('pooled', 'read four items');
    await eventually(async () => (await fx.rows<{ state: string }>('SELECT state FROM tasks WHERE id = $1', [taskId]))[0]?.state === 'done', {
      timeoutMs: 30_000,
      what: 'the task finished',
    }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${workers.map((w) => w.output().slice(-3000)).join('\n----\n')}`);
    });
    expect(target.served.map((u) => u.split('/').pop()).sort()).toEqual(['s1', 's2', 's3', 's4']);
    expect(target.max()).toBe(2);
    const calls = await fx.rows<{ status: string }>("SELECT status FROM runtime_calls WHERE task_id = $1 AND kind = 'read'", [taskId]);
    expect(calls.map((c) => c.status)).toEqual(['completed', 'completed', 'completed', 'completed']);
    expect(await fx.rows('SELECT 1 FROM case_cap_holds WHERE case_id = $1', [caseId])).toHaveLength(0);
    expect(await fx.rows("SELECT 1 FROM tasks WHERE case_id = $1 AND state = 'failed'", [caseId])).toHaveLength(0);
  }, 60_000);
});
