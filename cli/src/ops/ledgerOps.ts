/**
 * Operator commands over a case's ledger and a single gate: `verify`, `ledger [--follow]`,
 * `gate <id>` and `revoke <gateId>`. Like every operator command they hold no authority: the
 * server checks the token's principal.
 */
import { UsageError } from '../args.js';
import { emit } from '../output.js';
import { request } from './client.js';
import type { ApiTarget } from './client.js';
import { gatesText, ledgerEntryLine, verifyText } from './format.js';
import type { GateView, LedgerEntryView, VerifyView } from './format.js';

const PAGE = 500;

export async function verifyCommand(t: ApiTarget, caseId: string, json: boolean): Promise<number> {
  const r = await request<VerifyView>(t.url, t.token, 'GET', `/v1/cases/${caseId}/ledger/verify`);
  emit(json, r, () => verifyText(r));
  // A chain that does not verify is a failed command: scripts can alarm on the exit code.
  return r.ok ? 0 : 1;
}

/** Every page after `after`, in order; returns the last seq printed. */
async function printFrom(t: ApiTarget, caseId: string, after: number, json: boolean, out: (line: string) => void): Promise<number> {
  for (;;) {
    const r = await request<{ entries: LedgerEntryView[]; next: number | null }>(t.url, t.token, 'GET', `/v1/cases/${caseId}/ledger?after=${after}&limit=${PAGE}`);
    for (const e of r.entries) out(json ? JSON.stringify(e) : ledgerEntryLine(e));
    if (r.entries.length > 0) after = r.entries.at(-1)!.seq;
    if (r.next === null) return after;
  }
}

/**
 * The ledger from the start (one record a line; `--json`: one JSON record a line). With
 * `follow`, it keeps polling for records appended after the last one printed until `signal`
 * aborts (Ctrl-C): a record is printed once, in seq order, never skipped.
 */
export async function ledgerCommand(t: ApiTarget, caseId: string, o: { json: boolean; follow: boolean; pollMs: number; signal: AbortSignal; out?: (line: string) => void }): Promise<number> {
  const out = o.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  let after = await printFrom(t, caseId, 0, o.json, out);
  while (o.follow && !o.signal.aborted) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, o.pollMs);
      o.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });
    if (o.signal.aborted) break;
    after = await printFrom(t, caseId, after, o.json, out);
  }
  return 0;
}

export function pollInterval(v: string | undefined): number {
  if (v === undefined) return 1000;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 100 || n > 60_000) throw new UsageError('--interval-ms must be an integer from 100 to 60000');
  return n;
}

export async function gateCommand(t: ApiTarget, gateId: string, json: boolean): Promise<number> {
  // The whole packet, exactly as the gate API answers it: what a decision maker reviews.
  const r = await request<GateView & { packet: unknown }>(t.gateUrl, t.token, 'GET', `/v1/gates/${gateId}`);
  emit(json, r, () => `${gatesText([r])}\n\npacket:\n${JSON.stringify(r.packet, null, 2)}`);
  return 0;
}

export async function revokeCommand(t: ApiTarget, gateId: string, reason: string | undefined, json: boolean): Promise<number> {
  const r = await request<Record<string, unknown>>(t.gateUrl, t.token, 'POST', `/v1/gates/${gateId}/revoke`, reason ? { reason } : {});
  emit(json, r, () => `gate ${decodeURIComponent(gateId)} ${typeof r['gateState'] === 'string' ? r['gateState'] : 'revoked'}${typeof r['grantState'] === 'string' ? `; grant ${r['grantState']}` : ''}`);
  return 0;
}
