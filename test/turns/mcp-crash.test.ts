/**
 * MCP servers that die in the middle of a call (issue 11), on a real turn-worker process:
 *  - a stdio server (test/turns/fixtures/crashy-mcp.mjs, a child process of the worker) SIGKILLs
 *    itself while serving its first call;
 *  - a streamable-HTTP server drops every connection while serving its first call and then
 *    refuses connections until the test brings it back.
 * Each time the task parks `connector_down` (never fails), the call stays an open intent (not
 * completed), and once the server is back — the stdio server respawned as a new generation by
 * the next activation, the http server answering again — the task resumes: the recorded model
 * response is replayed, the call runs again under its original call id, the tool completes
 * exactly once and the task is done.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpHttpServer, readinessBudgetMs } from '@everdict/testkit';
import { call, eventually, modelAsks, REPO, say, testConfig, turnsFixture, type TurnsFixture } from './helpers.js';

const CRASHY = join(REPO, 'test/turns/fixtures/crashy-mcp.mjs');

/**
 * A streamable-HTTP MCP server on 127.0.0.1 whose `lookup` drops the connection in the middle of
 * its first call; from then on every request has its connection dropped until `back()`.
 */
function droppingHttpMcp() {
  let down = false;
  let dropped = false;
  const state = { received: 0, completed: [] as number[] };
  const mcp = (): Server => {
    const server = new Server({ name: 'records', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [{ name: 'lookup', description: 'Look a record up', inputSchema: { type: 'object', properties: { id: { type: 'number' } }, required: ['id'] } }],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (req) => {
      state.received++;
      if (!dropped) {
        dropped = true;
        down = true;
        // Mid-call: the request arrived and is being served; every connection goes, no answer leaves.
        endpoint.dropConnections();
        return new Promise(() => {});
      }
      const id = Number(req.params.arguments?.id);
      state.completed.push(id);
      return { content: [{ type: 'text', text: `record ${id}: found` }] };
    });
    return server;
  };
  const endpoint = mcpHttpServer(mcp, { admit: () => !down });
  return {
    ...endpoint,
    state,
    back() {
      down = false;
    },
  };
}

interface Row {
  turn: number;
  ordinal: number;
  id: string;
  tool_name: string;
  status: string;
  response: { content: string; outcome: string } | null;
}

describe('an MCP server that crashes mid-call', () => {
  let fx: TurnsFixture;
  let modelLog: string;
  let stdioState: string;
  const records = droppingHttpMcp();
  beforeAll(async () => {
    await records.start();
    const base = testConfig({
      routes: { stdio: 'stdio.json', http: 'http.json' },
      tools: {},
      profiles: {
        local: { version: '1', route: 'stdio', prompt: 'You look records up.', mcp: [{ server: 'crashy', tools: { lookup: { access: 'read' } } }] },
        remote: { version: '1', route: 'http', prompt: 'You look records up.', mcp: [{ server: 'records', tools: { lookup: { access: 'read', effects: { dataAccess: { egress: 'internal' } } } } }] },
      },
      caseTypes: {
        local: { rootProfile: 'local', scope: { reads: 'all', writes: [], forbidden: [] } },
        remote: { rootProfile: 'remote', scope: { reads: 'all', writes: [], forbidden: [] } },
      },
      runtime: { leaseTtlMs: 1500, sweepIntervalMs: 150, providerBackoffMs: { initial: 300, max: 1200 } },
    });
    fx = await turnsFixture('turns_mcp_crash', base);
    stdioState = join(fx.dir, 'crashy-state');
    mkdirSync(stdioState);
    fx.writeConfig({
      ...base,
      mcpServers: {
        crashy: { transport: 'stdio', command: process.execPath, args: [CRASHY, stdioState], timeoutMs: 5000 },
        records: { transport: 'http', url: records.url(), timeoutMs: 3000 },
      },
    });
    fx.writeScript('stdio', [call(['crashy__lookup', { id: 3 }]), say('record 3 found')]);
    fx.writeScript('http', [call(['records__lookup', { id: 5 }]), say('record 5 found')]);
    modelLog = join(fx.dir, 'model.log');
    await fx.worker('mcp-crash', { EVERDICT_MODEL_LOG: modelLog, LOG_LEVEL: 'info' });
  }, 30_000 + readinessBudgetMs());
  afterAll(async () => {
    await fx?.close();
    await records.stop();
  });

  const task = async (id: string) => (await fx.rows<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null }>('SELECT state, park_reason, park_detail FROM tasks WHERE id = $1', [id]))[0]!;
  const rowsOf = (taskId: string) =>
    fx.rows<Row>(
      `SELECT c.turn, c.ordinal, c.id, c.tool_name, c.status,
              (SELECT convert_from(r.bytes, 'UTF8')::jsonb FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.id = c.response_paper_id) AS response
         FROM runtime_calls c WHERE c.task_id = $1 AND c.ordinal > 0 ORDER BY c.turn, c.ordinal`,
      [taskId],
    );
  const turnRecords = async (caseId: string) =>
    (await fx.rows<{ body: { transition: string; calls: { ordinal: number; name: string; status: string; callId: string }[] } }>(`SELECT body FROM ledger WHERE case_id = $1 AND kind = 'turn' ORDER BY seq`, [caseId])).map((l) => l.body);
  const done = (taskId: string, what: string) =>
    eventually(
      async () => {
        const t = await task(taskId);
        if (t.state === 'failed') throw new Error(`task ${taskId} failed: ${JSON.stringify(t)}`);
        return t.state === 'done';
      },
      { timeoutMs: 30_000, what },
    );

  it('a stdio server killed mid-call parks the task connector_down; the respawned server completes the call once', async () => {
    const { caseId, taskId } = await fx.openCase('local', 'look record 3 up');
    await eventually(async () => existsSync(join(stdioState, 'crashed')), { timeoutMs: 30_000, what: 'the stdio server crashed mid-call' });
    await done(taskId, 'task done after the stdio server was respawned');

    // The turn parked connector_down with the call an open intent (not completed), and never failed.
    const parkedTurn = (await turnRecords(caseId)).find((r) => r.transition === 'park:connector_down');
    expect(parkedTurn?.calls.map((c) => [c.ordinal, c.name, c.status])).toEqual([
      [0, 'stdio', 'completed'],
      [1, 'crashy__lookup', 'intent'],
    ]);

    // One row: the call the crash interrupted, completed under its original id by a new server process.
    const rows = await rowsOf(taskId);
    expect(rows.map((r) => [r.turn, r.ordinal, r.tool_name, r.status, r.response?.content])).toEqual([[0, 1, 'crashy__lookup', 'completed', 'record 3: found']]);
    expect(parkedTurn!.calls[1]!.callId).toBe(rows[0]!.id);
    const crashedPid = readFileSync(join(stdioState, 'crashed'), 'utf8').trim();
    const completed = readFileSync(join(stdioState, 'completed'), 'utf8').split('\n').filter(Boolean).map((l) => l.split(' '));
    expect(completed.map(([id]) => id)).toEqual(['3']);
    expect(completed[0]![1]).not.toBe(crashedPid);
    // The recorded model response was replayed on resume, never asked again.
    expect(modelAsks(modelLog).filter((a) => a.taskId === taskId).map((a) => a.turn)).toEqual([0, 1]);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('an http server that drops the connection mid-call parks the task connector_down; it resumes when the server is back', async () => {
    const { caseId, taskId } = await fx.openCase('remote', 'look record 5 up');
    await eventually(async () => (await task(taskId)).park_reason === 'connector_down', { timeoutMs: 30_000, what: 'parked connector_down' });
    expect((await task(taskId)).park_detail).toMatchObject({ connector: 'mcp:records' });
    expect(records.state.received).toBe(1);
    // While the server is gone the call is an open intent, never completed; the task keeps parking.
    await eventually(async () => Number((await task(taskId)).park_detail?.attempt ?? 0) >= 2, { timeoutMs: 30_000, what: 'a second connector_down attempt' });
    const [open] = await rowsOf(taskId);
    expect(open).toMatchObject({ turn: 0, ordinal: 1, tool_name: 'records__lookup', status: 'intent' });
    expect(records.state.completed).toEqual([]);

    records.back();
    await done(taskId, 'task done after the http server came back');
    const rows = await rowsOf(taskId);
    expect(rows.map((r) => [r.turn, r.ordinal, r.id, r.status, r.response?.content])).toEqual([[0, 1, open!.id, 'completed', 'record 5: found']]);
    expect(records.state.completed).toEqual([5]);
    expect(modelAsks(modelLog).filter((a) => a.taskId === taskId).map((a) => a.turn)).toEqual([0, 1]);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });
});
