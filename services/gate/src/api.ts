/**
 * The gate's JSON API (DESIGN §7), mounted on the service's HTTP port:
 *
 *   GET  /v1/gates?state=open        gates the principal may see and has a role to decide
 *   GET  /v1/gates/:id               one such gate, with its exact packet and decisions (a
 *                                    consent gate: `kind: "consent"` and the exact call —
 *                                    tool, arguments, destination — its digest is bound to)
 *   POST /v1/gates/:id/decisions     {"decision", "verdict": "approve"|"reject", "digest", "reason"?}
 *   POST /v1/gates/:id/revoke        {"reason"?}  (operator, or a holder of one of the gate's roles)
 *
 * Every request needs `Authorization: Bearer <token>`; the token's sha256 names the principal and
 * its roles (fleet config `principals`). Ownership is enforced server-side on every read: a gate
 * of a customer the principal may not see is "not found", never "forbidden".
 * Errors are `{"error": code, "message", "field"?}`; 401 without a known token, 400 for a
 * malformed body (naming the field), 404/403/409/422 as `decide` answers.
 */
import type { ServerResponse } from 'node:http';
import { GATE_STATES, VERDICTS, isEverdictError, isOneOf, isUuid } from '@everdict/contracts';
import type { GateState } from '@everdict/contracts';
import { RequestError, authenticateRequest, readJsonObject, refuseBadQueryText, seesCustomer, sendError, sendJson, sendRequestError } from '@everdict/http-api';
import type { Principal, PrincipalDirectory, WebSessionLookup } from '@everdict/http-api';
import type { RouteHandler } from '@everdict/service-kit';
import { consentOfGate, listGatesForRoles, loadDecisions, loadGate, loadGrantOfGate, readPacketPaper } from '@everdict/store';
import type { DecisionRow, GateRow, Store } from '@everdict/store';
import { decide, revoke } from './decide.js';

interface GateApiOptions {
  readonly store: Store;
  readonly principals: () => PrincipalDirectory;
  /** Console sessions (cookie sign-in); absent: bearer tokens only. */
  readonly webSessions?: WebSessionLookup | undefined;
  readonly grantTtlMs: number;
  /** Largest accepted request body in bytes (default 64 KiB). */
  readonly maxBodyBytes?: number;
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const DECISION = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

export function gateApi(opts: GateApiOptions): RouteHandler {
  const maxBody = opts.maxBodyBytes ?? 64 * 1024;
  return async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://gate.invalid');
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] !== 'v1' || parts[1] !== 'gates') return false;

    const principal = await authenticateRequest(req, res, opts.principals(), opts.webSessions);
    if (!principal) return true;
    try {
      refuseBadQueryText(url.searchParams);
      const id = parts[2];
      if (id !== undefined && !isUuid(id)) return (sendError(res, 404, 'gate_not_found', 'no such gate'), true);
      if (parts.length === 2 && req.method === 'GET') return (await listGates(opts.store, principal, url, res), true);
      if (parts.length === 3 && req.method === 'GET') return (await showGate(opts.store, principal, id!, res), true);
      if (parts.length === 4 && parts[3] === 'decisions' && req.method === 'POST') {
        const body = await readJsonObject(req, maxBody);
        const input = verdictInput(id!, body);
        const result = await decide(opts.store, principal, input, opts.grantTtlMs);
        if (!result.ok) return (sendError(res, result.status, result.error, result.message, result.field), true);
        const { ok: _ok, status, ...out } = result;
        return (sendJson(res, status, out), true);
      }
      if (parts.length === 4 && parts[3] === 'revoke' && req.method === 'POST') {
        const body = await readJsonObject(req, maxBody);
        const reason = body['reason'];
        if (reason !== undefined && (typeof reason !== 'string' || reason.length > 2000)) throw new RequestError(400, 'invalid_body', 'reason must be a string of at most 2000 characters', 'reason');
        const result = await revoke(opts.store, principal, id!, (reason as string | undefined) ?? '');
        if (!result.ok) return (sendError(res, result.status, result.error, result.message), true);
        const { ok: _ok, ...out } = result;
        return (sendJson(res, 200, out), true);
      }
      const known = parts.length <= 3 || (parts.length === 4 && (parts[3] === 'decisions' || parts[3] === 'revoke'));
      if (known) sendError(res, 405, 'method_not_allowed', `${req.method ?? ''} is not allowed here`);
      else sendError(res, 404, 'not_found', 'no such route');
      return true;
    } catch (err) {
      if (err instanceof RequestError) return (sendRequestError(res, err), true);
      throw err;
    }
  };
}

function verdictInput(gateId: string, body: Record<string, unknown>) {
  const decision = body['decision'];
  const verdict = body['verdict'];
  const digest = body['digest'];
  const reason = body['reason'];
  if (typeof decision !== 'string' || !DECISION.test(decision)) throw new RequestError(400, 'invalid_body', 'decision must be a decision name', 'decision');
  if (!isOneOf(VERDICTS, verdict)) throw new RequestError(400, 'invalid_body', `verdict must be one of ${VERDICTS.join(', ')}`, 'verdict');
  if (typeof digest !== 'string' || !DIGEST.test(digest)) throw new RequestError(400, 'invalid_body', 'digest must be "sha256:" + 64 hex digits', 'digest');
  if (reason !== undefined && (typeof reason !== 'string' || reason.length > 2000)) throw new RequestError(400, 'invalid_body', 'reason must be a string of at most 2000 characters', 'reason');
  return { gateId, decision, verdict, digest, reason: (reason as string | undefined) ?? null };
}

async function listGates(store: Store, principal: Principal, url: URL, res: ServerResponse): Promise<void> {
  const state = url.searchParams.get('state') ?? 'open';
  if (!isOneOf(GATE_STATES, state)) throw new RequestError(400, 'invalid_query', `state must be one of ${GATE_STATES.join(', ')}`, 'state');
  const gates = (await listGatesForRoles(store.db, state as GateState, principal.roles)).filter((g) => seesCustomer(principal, g.customer));
  const decisions = await loadDecisions(store.db, gates.map((g) => g.id));
  const views = [];
  for (const g of gates) views.push(await gateView(store, principal, g, decisions.filter((d) => d.gate_id === g.id)));
  sendJson(res, 200, { gates: views });
}

async function showGate(store: Store, principal: Principal, id: string, res: ServerResponse): Promise<void> {
  const gate = await loadGate(store.db, id);
  const visible = gate !== undefined && seesCustomer(principal, gate.customer) && gate.required_decisions.some((d) => principal.roles.includes(d.role));
  if (!visible) return sendError(res, 404, 'gate_not_found', 'no such gate');
  sendJson(res, 200, await gateView(store, principal, gate, await loadDecisions(store.db, [gate.id])));
}

/** What a decision maker sees: the exact packet, every required decision and who answered it. */
async function gateView(store: Store, principal: Principal, g: GateRow, decisions: readonly DecisionRow[]) {
  let packet: unknown = null;
  let packetProblem: string | null = null;
  if (g.packet_paper_id && g.packet_revision) {
    // An unreadable packet is shown as such (and the coordinator refuses it); it never hides the gate.
    try {
      packet = (await readPacketPaper(store.db, g.packet_paper_id, g.packet_revision)).packet;
    } catch (err) {
      if (!isEverdictError(err, 'paper_missing') && !isEverdictError(err, 'paper_corrupt')) throw err;
      packetProblem = err.code;
    }
  }
  const grant = g.state === 'approved' || g.state === 'revoked' ? await loadGrantOfGate(store.db, g.id) : undefined;
  // A consent gate shows exactly what is consented to: the tool, its arguments, the destination.
  const consent = await consentOfGate(store.db, g.id);
  return {
    id: g.id,
    kind: consent === undefined ? 'write' : 'consent',
    caseId: g.case_id,
    taskId: g.task_id,
    state: g.state,
    packetDigest: g.packet_digest,
    operation: g.operation,
    effectClass: g.effect_class,
    summary: g.summary,
    impactKeys: g.impact_keys,
    mutationKey: g.mutation_key,
    reason: g.reason,
    createdAt: g.created_at.toISOString(),
    expiresAt: g.expires_at?.toISOString() ?? null,
    decidedAt: g.decided_at?.toISOString() ?? null,
    decisions: g.required_decisions.map((r) => {
      const given = decisions.find((d) => d.decision === r.decision);
      return {
        decision: r.decision,
        role: r.role,
        canDecide: principal.roles.includes(r.role) && given === undefined && g.state === 'open',
        verdict: given?.verdict ?? null,
        principal: given?.principal ?? null,
        digest: given?.digest ?? null,
        decidedAt: given?.created_at.toISOString() ?? null,
      };
    }),
    grant: grant ? { id: grant.id, state: grant.state, expiresAt: grant.expires_at.toISOString(), revokedAt: grant.revoked_at?.toISOString() ?? null } : null,
    packet,
    ...(packetProblem ? { packetProblem } : {}),
    ...(consent === undefined
      ? {}
      : { consent: { callId: consent.call_id, tool: consent.tool_name, arguments: consent.arguments, destination: consent.destination, rule: consent.rule, consumedAt: consent.consumed_at?.toISOString() ?? null } }),
  };
}
