/**
 * MCP tool servers on a real turn-worker process (fleet config `mcpServers`, profile `mcp`): a
 * scripted model calls tools of a stdio server (server-everything, a child process of the worker)
 * and of an in-test streamable-HTTP server. Every call is a journal row, its result reaches the
 * next model request, and the task completes; an undeclared remote read needs consent and is
 * refused by the permission hook; the stdio server runs with a scrubbed environment. A server
 * that is down parks the task `connector_down` (never fails it), with a growing backoff, and the
 * task resumes — the recorded response replayed, the read run again — once the server is back.
 */
import { join } from 'node:path';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpHttpServer, readinessBudgetMs } from '@everdict/testkit';
import { call, eventually, modelAsks, REPO, say, testConfig, turnsFixture, type TurnsFixture } from './helpers.js';

const EVERYTHING = join(REPO, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

/** The in-test ticket server: `lookup_ticket` claims to be a closed-world read; `search_tickets` is undeclared-effects. */
const invoked: string[] = [];
function ticketServer(): Server {
  const server = new Server({ name: 'tickets', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: 'lookup_ticket', description: 'Look up a ticket', inputSchema: { type: 'object', properties: { id: { type: 'number' } }, required: ['id'] }, annotations: { readOnlyHint: true, openWorldHint: false } },
      { name: 'search_tickets', description: 'Search tickets', inputSchema: { type: 'object', properties: { q: { type: 'string' } } }, annotations: { readOnlyHint: true } },
      { name: 'offered_to_nobody', description: 'Not declared by any profile', inputSchema: { type: 'object' } },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    invoked.push(req.params.name);
    return { content: [{ type: 'text', text: `ticket ${String(req.params.arguments?.id)}: printer on fire` }] };
  });
  return server;
}

interface Row {
  turn: number;
  ordinal: number;
  id: string;
  kind: string;
  tool_name: string;
  status: string;
  response: { content: string; outcome: string; refusal: string | null } | null;
}

describe('MCP tool servers on a real turn-worker', () => {
  let fx: TurnsFixture;
  let modelLog: string;
  const tickets = mcpHttpServer(ticketServer);
  beforeAll(async () => {
    await tickets.start();
    const base = testConfig({
      routes: { main: 'main.json', down: 'down.json' },
      tools: {},
      profiles: {
        agent: {
          version: '1',
          route: 'main',
          prompt: 'You answer tickets.',
          mcp: [
            { server: 'everything', tools: { echo: { access: 'read' }, 'get-env': { access: 'read' } } },
            // lookup_ticket is declared an internal read; search_tickets' effects are left undeclared.
            { server: 'tickets', tools: { lookup_ticket: { access: 'read', effects: { dataAccess: { egress: 'internal' } } }, search_tickets: { access: 'read' } } },
          ],
        },
        patient: { version: '1', route: 'down', prompt: 'You wait for the ticket system.', mcp: [{ server: 'tickets', tools: { lookup_ticket: { access: 'read', effects: { dataAccess: { egress: 'internal' } } } } }] },
      },
      caseTypes: {
        ticket: { rootProfile: 'agent', scope: { reads: 'all', writes: [], forbidden: [] } },
        waiting: { rootProfile: 'patient', scope: { reads: 'all', writes: [], forbidden: [] } },
      },
      runtime: { leaseTtlMs: 1500, sweepIntervalMs: 150, providerBackoffMs: { initial: 300, max: 1200 } },
    });
    fx = await turnsFixture('turns_mcp', {
      ...base,
      mcpServers: {
        everything: { transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'], env: { TICKET_GREETING: 'EVERDICT_TEST_MCP_GREETING' } },
        tickets: { transport: 'http', url: tickets.url(), timeoutMs: 5000 },
      },
    });
    fx.writeScript('main', [
      call(['everything__echo', { message: 'hi' }], ['tickets__lookup_ticket', { id: 4 }], ['tickets__search_tickets', { q: 'printer' }], ['everything__get-env', {}]),
      say('done'),
    ]);
    fx.writeScript('down', [call(['tickets__lookup_ticket', { id: 7 }]), say('the ticket system answered')]);
    modelLog = join(fx.dir, 'model.log');
    await fx.worker('mcp', { EVERDICT_MODEL_LOG: modelLog, EVERDICT_TEST_MCP_GREETING: 'hello from the fleet env', LOG_LEVEL: 'info' });
  }, 30_000 + readinessBudgetMs());
  afterAll(async () => {
    await fx?.close();
    await tickets.stop();
  });

  const task = async (id: string) => (await fx.rows<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null }>('SELECT state, park_reason, park_detail FROM tasks WHERE id = $1', [id]))[0]!;
  const rowsOf = (taskId: string) =>
    fx.rows<Row>(
      `SELECT c.turn, c.ordinal, c.id, c.kind, c.tool_name, c.status,
              (SELECT convert_from(r.bytes, 'UTF8')::jsonb FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.id = c.response_paper_id) AS response
         FROM runtime_calls c WHERE c.task_id = $1 AND c.ordinal > 0 ORDER BY c.turn, c.ordinal`,
      [taskId],
    );
  const requestOf = async (taskId: string, turn: number) => {
    const [r] = await fx.rows<{ request: string; versions: { toolSchemaHash: string } }>(
      `SELECT convert_from(paper_document(r.paper_id, r.revision), 'UTF8') AS request, c.versions FROM runtime_calls c JOIN papers p ON p.id = c.request_paper_id
         JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE c.task_id = $1 AND c.turn = $2 AND c.ordinal = 0`,
      [taskId, turn],
    );
    const doc = JSON.parse(r!.request) as { request: { tools: { name: string }[]; messages: { role: string; content: string }[] } };
    return { tools: doc.request.tools.map((t) => t.name), told: doc.request.messages.filter((m) => m.role === 'tool').map((m) => m.content), versions: r!.versions };
  };

  it('calls a stdio and a streamable-HTTP server’s declared tools: journalled, results in the next request, task done', async () => {
    const { caseId, taskId } = await fx.openCase('ticket', 'answer the ticket');
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 30_000, what: 'task done' });

    const rows = await rowsOf(taskId);
    expect(rows.map((r) => [r.turn, r.ordinal, r.tool_name, r.kind, r.status, r.response?.outcome])).toEqual([
      [0, 1, 'everything__echo', 'read', 'completed', 'ok'],
      [0, 2, 'tickets__lookup_ticket', 'read', 'completed', 'ok'],
      // An undeclared remote read is external egress: consent is required and the hook refuses it.
      [0, 3, 'tickets__search_tickets', 'read', 'refused', 'refused'],
      [0, 4, 'everything__get-env', 'read', 'completed', 'ok'],
    ]);
    expect(rows[0]!.response!.content).toBe('Echo: hi');
    expect(rows[1]!.response!.content).toBe('ticket 4: printer on fire');
    expect(rows[2]!.response!.refusal).toBe('permission_denied');
    expect(invoked).toEqual(['lookup_ticket']);

    // The stdio server's environment: the variable its config maps, none of the worker's own.
    const env = JSON.parse(rows[3]!.response!.content) as Record<string, string>;
    expect(env.TICKET_GREETING).toBe('hello from the fleet env');
    expect(env.DATABASE_URL).toBeUndefined();
    expect(env.EVERDICT_TEST_MCP_GREETING).toBeUndefined();
    expect(env.EVERDICT_CONFIG).toBeUndefined();

    // Only declared tools are offered; every result reaches the next model request.
    const first = await requestOf(taskId, 0);
    expect(first.tools.filter((n) => n.includes('__'))).toEqual(['everything__echo', 'everything__get-env', 'tickets__lookup_ticket', 'tickets__search_tickets']);
    const next = await requestOf(taskId, 1);
    expect(next.told).toEqual(rows.map((r) => r.response!.content));
    // The tool schemas the model saw are in the versions every call records.
    expect(next.versions.toolSchemaHash).toBe(first.versions.toolSchemaHash);
    expect(first.versions.toolSchemaHash).toMatch(/^sha256:/);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
    // Each new connection is the servers' health signal (what connector_down parks wake on).
    const health = await fx.rows<{ route: string }>(`SELECT route FROM route_health WHERE route LIKE 'mcp:%' AND last_ok_at IS NOT NULL ORDER BY route`);
    expect(health.map((h) => h.route)).toEqual(['mcp:everything', 'mcp:tickets']);
  });

  it('a server that is down parks the task connector_down with a growing backoff; it resumes when the server is back', async () => {
    await tickets.stop();
    const { caseId, taskId } = await fx.openCase('waiting', 'look the ticket up');
    await eventually(async () => (await task(taskId)).park_reason === 'connector_down', { timeoutMs: 30_000, what: 'parked connector_down' });
    expect((await task(taskId)).park_detail).toMatchObject({ connector: 'mcp:tickets' });
    // It keeps parking as the backoff runs out, each attempt counted; it never fails.
    await eventually(async () => Number((await task(taskId)).park_detail?.attempt ?? 0) >= 3, { timeoutMs: 30_000, what: 'a third connector_down attempt' });
    expect((await task(taskId)).state).toBe('parked');
    const [open] = await rowsOf(taskId);
    expect(open).toMatchObject({ turn: 0, ordinal: 1, tool_name: 'tickets__lookup_ticket', status: 'intent' });

    await tickets.start();
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 30_000, what: 'task done after the server came back' });
    const rows = await rowsOf(taskId);
    // The read that found the server down ran again under its original call id.
    expect(rows.map((r) => [r.turn, r.ordinal, r.id, r.status, r.response?.content])).toEqual([[0, 1, open!.id, 'completed', 'ticket 7: printer on fire']]);
    // The model was asked once per turn: the recorded response was replayed, never asked again.
    expect(modelAsks(modelLog).filter((a) => a.taskId === taskId).map((a) => a.turn)).toEqual([0, 1]);
    const ledger = await fx.rows<{ kind: string; body: { transition?: string; reason?: string } }>(`SELECT kind, body FROM ledger WHERE case_id = $1 ORDER BY seq`, [caseId]);
    expect(ledger.some((l) => l.body.transition === 'park:connector_down')).toBe(true);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });
});
