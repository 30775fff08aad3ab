/**
 * `takeover <caseId> --reason R`: takes over a case's session (seed 004 §11.1) through the intake
 * API as the token's principal. The server decides who may (role `operator`) and records the
 * handover (ledger `session_handover` from/to/reason) and notifies the previous controller.
 */
import { UsageError } from '../args.js';
import { emit } from '../output.js';
import { request } from './client.js';
import type { ApiTarget } from './client.js';

interface TakeoverReply {
  caseId: string;
  handedOver: boolean;
  from: string | null;
  session: { state: string; controller: string | null; since: string };
}

/** What the command prints for a takeover reply. Pure. */
export function takeoverText(r: TakeoverReply): string {
  if (!r.handedOver) return `case ${r.caseId}: you already operate its session (${r.session.state} since ${r.session.since})`;
  return `case ${r.caseId}: session taken over${r.from ? ` from ${r.from} (notified)` : ''}; ${r.session.controller ?? ''} operates it (${r.session.state})`;
}

export async function takeoverCommand(t: ApiTarget, caseId: string, reason: string | undefined, json: boolean): Promise<number> {
  if (reason === undefined || reason.trim() === '') throw new UsageError('takeover needs --reason R: why you take the session over (it is recorded in the ledger)');
  const r = await request<TakeoverReply>(t.url, t.token, 'POST', `/v1/cases/${caseId}/session/takeover`, { reason });
  emit(json, r, () => takeoverText(r));
  return 0;
}
