/**
 * The fresh-clone path (issue 6 item 3): `npm start` with neither DATABASE_URL nor AMQP_URL runs
 * all five services in one process on a file-backed PGlite database and the in-process
 * transport, with the sample config. Driven exactly as the README and the start banner tell a
 * person to: the demo requester opens a demo case over HTTP, its scripted agent proposes a note
 * (`writes__propose`), the auditor approves the packet, and a gate waits for the demo approver;
 * approving it executes the note once on the demo notebook and the task finishes. SIGTERM
 * drains with exit 0, and a restart on the same data folder still has the case.
 *
 * Each step is its own test, in order, on the one node: a step that cannot happen yet fails on
 * its own and the later ones still report (the node is restarted where they need it).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '@everdict/testkit';
import { call, startEverdict } from './node.js';
import type { EverdictNode } from './node.js';

// The demo-only tokens the sample config (infra/config/fleet.json) holds the hashes of.
const REQUESTER = 'everdict-demo-requester';
const APPROVER = 'everdict-demo-approver';

const dataDir = mkdtempSync(join(tmpdir(), 'everdict-embedded-'));
const start = () => startEverdict({ env: { EVERDICT_DATA_DIR: dataDir } });

interface GateView {
  id: string;
  caseId: string;
  state: string;
  packetDigest: string;
  operation: string;
  decisions: { decision: string; role: string; verdict: string | null }[];
}

describe('embedded mode: npm start on a fresh clone', () => {
  let node: EverdictNode | undefined;
  let caseId = '';
  let rootTaskId = '';

  afterAll(async () => {
    await node?.stop('SIGKILL');
  });

  const running = async (): Promise<EverdictNode> => (node ??= await start());
  const openGates = async (n: EverdictNode) => ((await call(n.url, 'GET', '/v1/gates?state=open', APPROVER)).body['gates'] as GateView[] | undefined) ?? [];

  it('serves the API, health and metrics on PORT, and prints how to open a demo case and decide its gate', async () => {
    const n = await running();
    expect((await fetch(`${n.url}/livez`)).status).toBe(200);
    const ready = (await call(n.url, 'GET', '/readyz')).body;
    expect(Object.keys(ready['checks'] as object).sort()).toEqual(['postgres', 'transport']);
    expect(await (await fetch(`${n.url}/metrics`)).text()).toContain('everdict_outbox_pending');
    const out = n.output();
    expect(out).toContain('Everdict is running embedded: intake, turn-worker, gate, execution-coordinator, reconciler');
    expect(out).toContain(`curl -s -X POST ${n.url}/v1/cases`);
    expect(out).toContain(`Bearer ${REQUESTER}`);
    expect(out).toContain('node bin/everdict.js gates');
    expect(out).toContain('--decision publish-note --verdict approve');
    expect(n.logs().find((l) => l['msg'] === 'fleet node ready')).toMatchObject({ mode: 'embedded', dataDir, demoConnectors: true });
  });

  it('opens the demo case as the banner says, and its root agent runs durable turns', async () => {
    const n = await running();
    const opened = await call(n.url, 'POST', '/v1/cases', REQUESTER, { caseType: 'demo', title: 'Status update, please' });
    expect(opened.status).toBe(201);
    caseId = opened.body['caseId'] as string;
    rootTaskId = opened.body['rootTaskId'] as string;
    expect(rootTaskId).toBeTruthy();
    const turns = await eventually(
      async () => {
        const ledger = await call(n.url, 'GET', `/v1/cases/${caseId}/ledger`, REQUESTER);
        const entries = (ledger.body['entries'] as { kind: string; body: { taskId?: string } }[] | undefined) ?? [];
        const t = entries.filter((e) => e.kind === 'turn' && e.body.taskId === rootTaskId);
        return t.length > 0 ? t : undefined;
      },
      { timeoutMs: 30_000, what: 'a committed turn of the root task in the ledger' },
    );
    expect(turns.length).toBeGreaterThan(0);
  });

  it('the demo agent reads its notebook first: a completed connector read in its first turn', async () => {
    const n = await running();
    const first = await eventually(
      async () => {
        const ledger = await call(n.url, 'GET', `/v1/cases/${caseId}/ledger`, REQUESTER);
        const entries = (ledger.body['entries'] as { kind: string; body: { taskId?: string; turn?: number; calls?: { name: string; status: string }[] } }[] | undefined) ?? [];
        return entries.find((e) => e.kind === 'turn' && e.body.taskId === rootTaskId && e.body.turn === 0);
      },
      { timeoutMs: 30_000, what: 'the first turn of the root task in the ledger' },
    );
    expect(first.body.calls?.map((c) => [c.name, c.status])).toContainEqual(['notes__notes_list', 'completed']);
  });

  it('reaches a gate, open for the demo approver (needs writes__propose in the turn-worker)', async () => {
    const n = await running();
    expect(caseId).not.toBe('');
    // Waits for the gate, or for the root task to settle without one (then fails at once, saying how).
    const seen = await eventually(
      async () => {
        const gate = (await openGates(n)).find((g) => g.caseId === caseId);
        if (gate) return gate;
        const shown = await call(n.url, 'GET', `/v1/cases/${caseId}`, REQUESTER);
        const root = (shown.body['tasks'] as { id: string; state: string }[]).find((t) => t.id === rootTaskId);
        return root && ['done', 'failed', 'cancelled'].includes(root.state) ? { rootTaskSettledWithoutGate: root.state } : undefined;
      },
      { timeoutMs: 30_000, what: 'an open gate of the demo case' },
    );
    expect(seen).toMatchObject({ state: 'open', operation: expect.stringContaining('notes.append') });
    const gate = seen as GateView;
    expect(gate.decisions.map((d) => [d.decision, d.role])).toEqual([['publish-note', 'approver']]);
    const shown = await call(n.url, 'GET', `/v1/cases/${caseId}`, REQUESTER);
    expect((shown.body['tasks'] as { id: string; state: string }[]).find((t) => t.id === rootTaskId)?.state).toBe('parked');
  });

  it('approving the gate executes the note once on the demo notebook and the root task finishes', async () => {
    const n = await running();
    const gate = (await openGates(n)).find((g) => g.caseId === caseId);
    expect(gate, 'an open gate of the demo case').toBeTruthy();
    const decided = await call(n.url, 'POST', `/v1/gates/${gate!.id}/decisions`, APPROVER, { decision: 'publish-note', verdict: 'approve', digest: gate!.packetDigest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(201);
    expect(decided.body).toMatchObject({ gateState: 'approved' });
    await eventually(
      async () => {
        const shown = await call(n.url, 'GET', `/v1/cases/${caseId}`, REQUESTER);
        return (shown.body['tasks'] as { id: string; state: string }[]).find((t) => t.id === rootTaskId)?.state === 'done';
      },
      { timeoutMs: 30_000, what: 'the root task done after the approved effect' },
    );
    const notes = await call(n.url, 'GET', '/demo/notes/notes');
    expect(notes.body['count']).toBe(1);
  });

  it('drains on SIGTERM and exits 0', async () => {
    const n = await running();
    expect(await n.stop('SIGTERM')).toBe(0);
    expect(n.logs().find((l) => l['msg'] === 'shutdown complete')).toMatchObject({ code: 0 });
    node = undefined;
  });

  it('restarted on the same data folder, still has the case (file-backed)', async () => {
    expect(caseId).not.toBe('');
    const n = await running();
    const shown = await call(n.url, 'GET', `/v1/cases/${caseId}`, REQUESTER);
    expect(shown.status).toBe(200);
    expect(shown.body).toMatchObject({ caseId, caseType: 'demo', customer: 'demo', title: 'Status update, please' });
    expect(n.logs().some((l) => l['msg'] === 'migrations applied'), 'a second start applies no migration').toBe(false);
    expect(await n.stop('SIGTERM')).toBe(0);
    node = undefined;
  });
});
