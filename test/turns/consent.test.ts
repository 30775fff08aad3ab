/**
 * Consent for egress reads (K3) on real processes: a turn-worker and a gate service (`everdict
 * start`), an in-test streamable-HTTP MCP server whose `search_tickets` is an undeclared remote
 * read (external egress, so consent is required) and that counts every call of it.
 *   ask + approve → the task parks `consent` on a consent gate that shows the tool, arguments and
 *                   destination; a decision on the wrong digest or without the role is refused;
 *                   the approval wakes the task and the call runs exactly once; the consent is
 *                   consumed by that call id, and the same call again needs a consent of its own;
 *   ask + expiry  → a decision on the expired gate is refused, the call is refused `consent_denied`;
 *   ask + reject  → the model's next request carries the `consent_denied` refusal, the server is
 *                   never called, and the call is a `refused` row in the journal and the ledger;
 *   deny rule     → refused (`consent_denied`) without parking or a gate;
 *   allow rule    → runs without parking or a gate.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { TEST_AMQP_URL, everdictStartArgs, freePort, mcpHttpServer, readinessBudgetMs } from '@everdict/testkit';
import { call, eventually, REPO, say, testConfig, turnsFixture, type TurnsFixture } from './helpers.js';

/** Calls of `search_tickets`, by the query they carried (each case searches its own). */
const searched = new Map<string, number>();

function ticketServer(): Server {
  const server = new Server({ name: 'tickets', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    // Its annotations claim a closed-world read: a self-claim, which never skips consent.
    tools: [{ name: 'search_tickets', description: 'Search tickets', inputSchema: { type: 'object', properties: { q: { type: 'string' } } }, annotations: { readOnlyHint: true, openWorldHint: false } }],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const q = String(req.params.arguments?.q);
    searched.set(q, (searched.get(q) ?? 0) + 1);
    return { content: [{ type: 'text', text: `3 tickets match ${q}` }] };
  });
  return server;
}

async function startMcp(): Promise<{ url: string; stop(): Promise<void> }> {
  const endpoint = mcpHttpServer(ticketServer);
  await endpoint.start();
  return { url: endpoint.url(), stop: () => endpoint.stop() };
}

const TOKENS = { alice: 'alice-consent-token-1', mallory: 'mallory-consent-tok2' } as const;
const hashOf = (t: string) => `sha256:${sha256Hex(t)}`;
const TOOL = 'tickets__search_tickets';

interface GateView {
  id: string;
  kind: string;
  taskId: string;
  state: string;
  packetDigest: string;
  decisions: { decision: string; role: string; canDecide: boolean; verdict: string | null; principal: string | null; digest: string | null }[];
  consent?: { callId: string; tool: string; arguments: Record<string, unknown>; destination: Record<string, unknown>; consumedAt: string | null };
}

interface Row {
  turn: number;
  ordinal: number;
  id: string;
  tool_name: string;
  status: string;
  response: { content: string; outcome: string; refusal: string | null } | null;
}

describe('consent for egress reads on a real turn-worker and gate', () => {
  let fx: TurnsFixture;
  let mcp: Awaited<ReturnType<typeof startMcp>>;
  let gate: ChildProcess | null = null;
  let gateOut = '';
  let gatePort = 0;

  beforeAll(async () => {
    mcp = await startMcp();
    const profile = (route: string) => ({ version: '1', route, prompt: 'You search tickets.', mcp: [{ server: 'tickets', tools: { search_tickets: { access: 'read' as const } } }] });
    const scope = { reads: 'all' as const, writes: [], forbidden: [] };
    const base = testConfig({
      routes: { approve: 'approve.json', reject: 'reject.json', deny: 'deny.json', allow: 'allow.json', expire: 'expire.json' },
      tools: {},
      profiles: { approving: profile('approve'), rejecting: profile('reject'), denying: profile('deny'), allowing: profile('allow'), expiring: profile('expire') },
      caseTypes: {
        // The tool's own rule wins over its server's.
        approve: { rootProfile: 'approving', scope, consent: { rules: { [TOOL]: 'ask', tickets: 'deny' }, role: 'approver', ttlMs: 600_000 } },
        reject: { rootProfile: 'rejecting', scope, consent: { rules: { tickets: 'ask' } } },
        deny: { rootProfile: 'denying', scope, consent: { rules: { tickets: 'deny' } } },
        allow: { rootProfile: 'allowing', scope, consent: { rules: { [TOOL]: 'allow' } } },
        expire: { rootProfile: 'expiring', scope, consent: { rules: { tickets: 'ask' }, ttlMs: 1000 } },
      },
    });
    const config: FleetConfig = {
      ...base,
      mcpServers: { tickets: { transport: 'http', url: mcp.url, timeoutMs: 5000 } },
      principals: {
        alice: { tokenHash: hashOf(TOKENS.alice), roles: ['approver'] },
        mallory: { tokenHash: hashOf(TOKENS.mallory), roles: ['finance'] },
      },
    };
    fx = await turnsFixture('turns_consent', config);
    for (const name of ['reject', 'deny', 'allow', 'expire']) fx.writeScript(name, [call([TOOL, { q: name }]), say(`${name}: done`)]);
    // The same call twice: an approved consent admits its own call only.
    fx.writeScript('approve', [call([TOOL, { q: 'approve' }]), call([TOOL, { q: 'approve' }]), say('approve: done')]);
    await fx.worker('consent');

    gatePort = await freePort();
    gate = spawn(process.execPath, everdictStartArgs(['gate']), {
      cwd: REPO,
      env: { ...process.env, DATABASE_URL: fx.dbUrl, AMQP_URL: TEST_AMQP_URL, EVERDICT_CONFIG: fx.configPath, EVERDICT_AMQP_PREFIX: fx.prefix, PORT: String(gatePort), LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gate.stdout!.on('data', (b: Buffer) => (gateOut = (gateOut + b.toString()).slice(-50_000)));
    gate.stderr!.on('data', (b: Buffer) => (gateOut = (gateOut + b.toString()).slice(-50_000)));
    await eventually(async () => (await fetch(`http://127.0.0.1:${gatePort}/readyz`).catch(() => null))?.status === 200, { timeoutMs: readinessBudgetMs(), intervalMs: 100, what: 'gate ready' }).catch(
      (err: unknown) => {
        throw new Error(`${String(err)}\n${gateOut.slice(-3000)}`);
      },
    );
  }, 60_000 + 2 * readinessBudgetMs());

  afterAll(async () => {
    if (gate && gate.exitCode === null) {
      const exited = new Promise((r) => gate!.once('exit', r));
      gate.kill('SIGTERM');
      await exited;
    }
    await fx?.close();
    await mcp?.stop();
  });

  const api = async (path: string, token: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${gatePort}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const task = async (id: string) => (await fx.rows<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null }>('SELECT state, park_reason, park_detail FROM tasks WHERE id = $1', [id]))[0]!;
  const rowsOf = (taskId: string) =>
    fx.rows<Row>(
      `SELECT c.turn, c.ordinal, c.id, c.tool_name, c.status,
              (SELECT convert_from(r.bytes, 'UTF8')::jsonb FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.id = c.response_paper_id) AS response
         FROM runtime_calls c WHERE c.task_id = $1 AND c.ordinal > 0 ORDER BY c.turn, c.ordinal`,
      [taskId],
    );
  const toldInTurn = async (taskId: string, turn: number) => {
    const [r] = await fx.rows<{ request: string }>(
      `SELECT convert_from(paper_document(r.paper_id, r.revision), 'UTF8') AS request FROM runtime_calls c JOIN papers p ON p.id = c.request_paper_id
         JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE c.task_id = $1 AND c.turn = $2 AND c.ordinal = 0`,
      [taskId, turn],
    );
    return (JSON.parse(r!.request) as { request: { messages: { role: string; content: string }[] } }).request.messages.filter((m) => m.role === 'tool').map((m) => m.content);
  };
  const ledgerCalls = async (caseId: string) =>
    (await fx.rows<{ body: { calls: { name: string; status: string; refusal?: string }[] } }>(`SELECT body FROM ledger WHERE case_id = $1 AND kind = 'turn' ORDER BY seq`, [caseId])).flatMap((r) =>
      (r.body.calls ?? []).filter((c) => c.name === TOOL).map((c) => [c.name, c.status, c.refusal ?? null]),
    );
  const ledgerKinds = async (caseId: string) => (await fx.rows<{ kind: string }>(`SELECT kind FROM ledger WHERE case_id = $1 ORDER BY seq`, [caseId])).map((r) => r.kind);
  const gatesOf = (taskId: string) => fx.rows<{ id: string; kind: string; state: string }>('SELECT id, kind, state FROM gates WHERE task_id = $1', [taskId]);
  const parkedOnGate = async (taskId: string): Promise<GateView> => {
    await eventually(async () => (await task(taskId)).park_reason === 'consent', { timeoutMs: 30_000, what: 'parked on consent' });
    const gateId = String((await task(taskId)).park_detail?.gateId);
    const shown = await api(`/v1/gates/${gateId}`, TOKENS.alice);
    expect(shown.status).toBe(200);
    return shown.body as unknown as GateView;
  };

  it('ask + approve: parks on a consent gate showing the exact call; wrong digest and missing role are refused; the approved call runs once', async () => {
    const { caseId, taskId } = await fx.openCase('approve', 'search the tickets');
    const view = await parkedOnGate(taskId);
    expect(view).toMatchObject({ kind: 'consent', taskId, state: 'open', consent: { tool: TOOL, arguments: { q: 'approve' }, destination: { kind: 'mcp', server: 'tickets', url: mcp.url }, consumedAt: null } });
    expect(view.decisions).toEqual([expect.objectContaining({ decision: 'consent', role: 'approver', canDecide: true, verdict: null })]);
    // The call waits with an open intent; nothing reached the server.
    const [open] = await rowsOf(taskId);
    expect(open).toMatchObject({ turn: 0, ordinal: 1, tool_name: TOOL, status: 'intent', id: view.consent!.callId });
    expect(searched.get('approve')).toBeUndefined();
    // The role holder's open list carries it.
    const listed = await api('/v1/gates?state=open', TOKENS.alice);
    expect((listed.body.gates as GateView[]).map((g) => g.id)).toContain(view.id);

    const wrong = await api(`/v1/gates/${view.id}/decisions`, TOKENS.alice, { decision: 'consent', verdict: 'approve', digest: `sha256:${'0'.repeat(64)}` });
    expect(wrong).toMatchObject({ status: 409, body: { error: 'digest_mismatch', field: 'digest' } });
    const noRole = await api(`/v1/gates/${view.id}/decisions`, TOKENS.mallory, { decision: 'consent', verdict: 'approve', digest: view.packetDigest });
    expect(noRole).toMatchObject({ status: 403, body: { error: 'role_required' } });
    expect((await task(taskId)).state).toBe('parked');

    const approved = await api(`/v1/gates/${view.id}/decisions`, TOKENS.alice, { decision: 'consent', verdict: 'approve', digest: view.packetDigest });
    expect(approved).toMatchObject({ status: 201, body: { gateState: 'approved' } });

    // The approved call runs once; the same call again (next turn, another call id) is not
    // admitted by that consent: it parks on a gate of its own.
    await eventually(async () => (await task(taskId)).park_reason === 'consent' && (await task(taskId)).park_detail?.gateId !== view.id, { timeoutMs: 30_000, what: 'parked on a second gate' });
    expect(searched.get('approve')).toBe(1);
    const again = await parkedOnGate(taskId);
    expect(again.consent).toMatchObject({ tool: TOOL, arguments: { q: 'approve' } });
    expect(again.consent!.callId).not.toBe(view.consent!.callId);
    // Same tool, arguments and destination: the same digest, and still a separate decision.
    expect(again.packetDigest).toBe(view.packetDigest);
    expect(await api(`/v1/gates/${again.id}/decisions`, TOKENS.alice, { decision: 'consent', verdict: 'reject', digest: again.packetDigest })).toMatchObject({ status: 201 });
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 30_000, what: 'task done' });

    expect(searched.get('approve')).toBe(1);
    const rows = await rowsOf(taskId);
    expect(rows.map((r) => [r.turn, r.ordinal, r.tool_name, r.status, r.response?.refusal ?? null])).toEqual([
      [0, 1, TOOL, 'completed', null],
      [1, 1, TOOL, 'refused', 'consent_denied'],
    ]);
    expect(rows[0]!.id).toBe(view.consent!.callId);
    expect(await toldInTurn(taskId, 1)).toEqual(['3 tickets match approve']);
    // The decision is bound to principal, role and digest; the consent was consumed by its call.
    expect(await fx.rows('SELECT principal, role, verdict, digest FROM decisions WHERE gate_id = $1', [view.id])).toEqual([{ principal: 'alice', role: 'approver', verdict: 'approve', digest: view.packetDigest }]);
    const shown = (await api(`/v1/gates/${view.id}`, TOKENS.alice)).body as unknown as GateView;
    expect(shown.consent!.consumedAt).not.toBeNull();
    expect(await ledgerKinds(caseId)).toEqual(expect.arrayContaining(['consent_requested', 'consent_approved']));
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('ask + reject: the model is told consent_denied, the server is never called, the call is a refused row in the journal and the ledger', async () => {
    const { caseId, taskId } = await fx.openCase('reject', 'search the tickets');
    const view = await parkedOnGate(taskId);
    expect(view.consent).toMatchObject({ tool: TOOL, arguments: { q: 'reject' } });
    const rejected = await api(`/v1/gates/${view.id}/decisions`, TOKENS.alice, { decision: 'consent', verdict: 'reject', digest: view.packetDigest, reason: 'not this customer' });
    expect(rejected).toMatchObject({ status: 201, body: { gateState: 'rejected' } });
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 30_000, what: 'task done after rejection' });

    expect(searched.get('reject')).toBeUndefined();
    const rows = await rowsOf(taskId);
    expect(rows.map((r) => [r.tool_name, r.status, r.response?.outcome, r.response?.refusal])).toEqual([[TOOL, 'refused', 'refused', 'consent_denied']]);
    const told = await toldInTurn(taskId, 1);
    expect(told).toHaveLength(1);
    expect(told[0]).toMatch(/^Kernel refusal \[consent_denied\].*not this customer/);
    // The parking turn's record lists the open intent; the resumed turn's, the refusal.
    expect(await ledgerCalls(caseId)).toEqual([
      [TOOL, 'intent', null],
      [TOOL, 'refused', 'consent_denied'],
    ]);
    expect(await ledgerKinds(caseId)).toEqual(expect.arrayContaining(['consent_requested', 'consent_rejected']));
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('an expired consent gate accepts no decision, and the waiting call is refused consent_denied', async () => {
    const { taskId } = await fx.openCase('expire', 'search the tickets');
    const view = await parkedOnGate(taskId);
    await new Promise((r) => setTimeout(r, 1200));
    const late = await api(`/v1/gates/${view.id}/decisions`, TOKENS.alice, { decision: 'consent', verdict: 'approve', digest: view.packetDigest });
    expect(late).toMatchObject({ status: 409, body: { error: 'gate_expired' } });
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 30_000, what: 'task done after expiry' });
    expect(searched.get('expire')).toBeUndefined();
    const rows = await rowsOf(taskId);
    expect(rows.map((r) => [r.status, r.response?.refusal])).toEqual([['refused', 'consent_denied']]);
    expect(rows[0]!.response!.content).toContain('consent expired');
    expect(await fx.rows('SELECT count(*)::int AS n FROM decisions WHERE gate_id = $1', [view.id])).toEqual([{ n: 0 }]);
  });

  it('a deny rule refuses the read without parking; an allow rule runs it without parking', async () => {
    const denied = await fx.openCase('deny', 'search the tickets');
    const allowed = await fx.openCase('allow', 'search the tickets');
    await eventually(async () => (await task(denied.taskId)).state === 'done' && (await task(allowed.taskId)).state === 'done', { timeoutMs: 30_000, what: 'both tasks done' });

    expect(searched.get('deny')).toBeUndefined();
    const deniedRows = await rowsOf(denied.taskId);
    expect(deniedRows.map((r) => [r.status, r.response?.refusal])).toEqual([['refused', 'consent_denied']]);
    expect(deniedRows[0]!.response!.content).toContain('caseTypes.deny.consent.rules.tickets is deny');
    expect(await ledgerCalls(denied.caseId)).toEqual([[TOOL, 'refused', 'consent_denied']]);

    expect(searched.get('allow')).toBe(1);
    expect((await rowsOf(allowed.taskId)).map((r) => r.status)).toEqual(['completed']);

    // Neither parked: no consent gate, no consent park in either case's record.
    expect(await gatesOf(denied.taskId)).toEqual([]);
    expect(await gatesOf(allowed.taskId)).toEqual([]);
    for (const c of [denied, allowed]) expect(await ledgerKinds(c.caseId)).not.toContain('consent_requested');
  });
});
