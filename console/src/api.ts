/**
 * The console's only way to the server: the public HTTP API, same origin, authenticated by the
 * HttpOnly session cookie the sign-in exchange set. A mutating request carries the readable
 * `everdict_csrf` cookie back as `X-CSRF-Token` (double submit); the server refuses it otherwise.
 * Every answer is returned with its status — the server decides what a principal may see or do,
 * and a page shows its 401/403/404 instead of guessing.
 */

export interface ApiError {
  readonly error: string;
  readonly message: string;
  readonly field?: string;
}

export type Reply<T> = { readonly ok: true; readonly status: number; readonly body: T } | { readonly ok: false; readonly status: number; readonly body: ApiError };

const CSRF_COOKIE = 'everdict_csrf';
const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The CSRF cookie's value, or undefined before sign-in. */
export function csrfToken(cookies: string = document.cookie): string | undefined {
  for (const part of cookies.split(';')) {
    const [name, ...rest] = part.trim().split('=');
    if (name === CSRF_COOKIE) return decodeURIComponent(rest.join('='));
  }
  return undefined;
}

/** Observers of a 401: the shell sends the operator back to sign-in. */
const unauthorised = new Set<() => void>();
export function onUnauthorised(fn: () => void): () => void {
  unauthorised.add(fn);
  return () => unauthorised.delete(fn);
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<Reply<T>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (MUTATING.has(method)) {
    const csrf = csrfToken();
    if (csrf !== undefined) headers['x-csrf-token'] = csrf;
  }
  let res: Response;
  try {
    res = await fetch(path, { method, headers, credentials: 'same-origin', ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  } catch (err) {
    return { ok: false, status: 0, body: { error: 'network', message: `the server could not be reached (${String(err)})` } };
  }
  const text = await res.text();
  let parsed: unknown = {};
  if (text.length > 0) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { error: 'not_json', message: text.slice(0, 500) };
    }
  }
  if (res.status === 401 && path !== '/v1/session') unauthorised.forEach((fn) => fn());
  if (res.ok) return { ok: true, status: res.status, body: parsed as T };
  const e = parsed as Partial<ApiError>;
  return { ok: false, status: res.status, body: { error: e.error ?? `http_${res.status}`, message: e.message ?? res.statusText, ...(e.field ? { field: e.field } : {}) } };
}

// ------------------------------------------------------------------------------- shapes
// What the pages read of the API's answers (services/intake/src/views.ts, services/gate/src/api.ts).

export interface SessionInfo {
  readonly principal: string;
  readonly roles: readonly string[];
  readonly customers: readonly string[] | null;
}

export interface CaseSummary {
  readonly caseId: string;
  readonly caseType: string;
  readonly state: string;
  readonly parkedReason?: string | null;
  readonly stateSince: string;
  readonly customer: string;
  readonly title: string;
  readonly stopMode: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface CostTotals {
  readonly [k: string]: number | null | undefined;
}

export interface TaskNode {
  readonly id: string;
  readonly profile: string;
  readonly state: string;
  readonly parkReason: string | null;
  readonly budget: { readonly limitMinutes: number | null; readonly usedMinutes: number };
  readonly createdAt: string;
  readonly costs: CostTotals;
  readonly costsWithChildren: CostTotals;
  readonly children: readonly TaskNode[];
}

export interface PlanStep {
  readonly stepId: string;
  readonly revision: number;
  readonly title: string;
  readonly dependsOn: readonly string[];
  readonly status: string;
  readonly taskId?: string;
}

export interface TaskPlan {
  readonly taskId: string;
  readonly root: boolean;
  readonly latestRevision: number;
  readonly confirmedRevision: number | null;
  readonly revisions: readonly {
    readonly revision: number;
    readonly planHash: string;
    readonly steps: readonly { stepId: string; title: string; dependsOn: readonly string[] }[];
    readonly submittedAt: string;
    readonly confirmation: { by: string | null; at: string } | null;
  }[];
  readonly current: readonly PlanStep[];
}

export interface CaseGate {
  readonly id: string;
  readonly taskId: string;
  readonly state: string;
  readonly operation: string;
  readonly effectClass: string;
  readonly packetDigest: string;
  readonly createdAt: string;
  readonly decidedAt: string | null;
  readonly roles?: readonly string[];
  readonly requiredDecisions?: readonly { decision: string; role: string }[];
  readonly decisions?: readonly { decision: string; verdict: string; principal: string; role: string; at: string }[];
  readonly expiresAt?: string | null;
  readonly deadlineAt?: string | null;
}

export interface Question {
  readonly id: string;
  readonly taskId: string;
  readonly gap: string;
  readonly decisionNeeded: string;
  readonly alternatives: unknown;
  readonly open: boolean;
  readonly answeredBy: string | null;
  readonly createdAt: string;
  readonly answeredAt: string | null;
}

export interface CaseDetail extends CaseSummary {
  readonly objective: unknown;
  readonly tasks: readonly TaskNode[];
  readonly costs: CostTotals;
  readonly plan: readonly PlanStep[];
  readonly plans: readonly TaskPlan[];
  readonly gates: readonly CaseGate[];
  readonly questions: readonly Question[];
  readonly papers?: readonly Record<string, unknown>[];
  readonly session: { readonly state: string; readonly controller: string | null; readonly since: string };
  readonly notifications?: unknown;
}

export interface LedgerEntry {
  readonly seq: number;
  readonly recordId: string;
  readonly kind: string;
  readonly body: unknown;
  readonly prevHash: string | null;
  readonly hash: string;
  readonly createdAt: string;
}

export interface GateDecisionView {
  readonly decision: string;
  readonly role: string;
  readonly canDecide: boolean;
  readonly verdict: string | null;
  readonly principal: string | null;
  readonly digest: string | null;
  readonly decidedAt: string | null;
}

export interface GateView {
  readonly id: string;
  readonly kind: 'write' | 'consent';
  readonly caseId: string;
  readonly taskId: string;
  readonly state: string;
  readonly packetDigest: string;
  readonly operation: string;
  readonly effectClass: string;
  readonly summary: string | null;
  readonly impactKeys: readonly string[] | null;
  readonly reason: string | null;
  readonly createdAt: string;
  readonly expiresAt: string | null;
  readonly decidedAt: string | null;
  readonly decisions: readonly GateDecisionView[];
  readonly grant: { id: string; state: string; expiresAt: string; revokedAt: string | null } | null;
  readonly packet: Record<string, unknown> | null;
  readonly packetProblem?: string;
  readonly consent?: { callId: string; tool: string; arguments: unknown; destination: unknown; rule: unknown; consumedAt: string | null };
}
