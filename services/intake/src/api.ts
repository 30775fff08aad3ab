/**
 * The intake JSON API (DESIGN §7), mounted on the service's HTTP port:
 *
 *   POST /v1/cases                    {caseType, title, objective?, material?, customer?, originKey?}
 *                                     → 201 {caseId, created: true, rootTaskId} | 200 {caseId, created: false}
 *   GET  /v1/cases?state=&customer=&parkReason=&origin=&q=&limit=&before=
 *                                     the principal's cases, newest first (`next` pages on)
 *   GET  /v1/cases/:id                state, task tree, plans, gates (with roles), questions, papers, costs, session
 *   GET  /v1/cases/:id/ledger?after=SEQ&limit=N
 *   GET  /v1/cases/:id/ledger/stream?after=SEQ   the live ledger as Server-Sent Events (ledgerStream.ts)
 *   POST|GET|DELETE /v1/session       console sign-in with a bearer token → session cookie (webSession.ts)
 *   GET  /v1/exceptions, POST /v1/dead-letters/:id/replay   (role `operator`; exceptions.ts)
 *   POST /v1/cases/:id/cancel         {"mode": "hard"|"soft", "reason"?}
 *   POST /v1/cases/:id/resume         {"reason"?}  lift a soft stop (role `operator`; operatorControls.ts)
 *   POST /v1/cases/:id/top-up         {"budget": {…}, "taskId"?, "reason"?}  (role `operator`)
 *   POST /v1/cases/:id/session/takeover  {"reason"}  take over the case's session (role `operator`; sessions.ts)
 *   Cancel, resume, top-up and answer are operator actions: only the case's controller runs them
 *   (the first principal to act becomes it); anyone else gets 403 `not_controller` (sessions.ts).
 *   POST /v1/questions/:id/answer     {"answer": "…", "chosenAlternative"?}
 *   POST /v1/intake/:source           a signed ticket webhook (raw bytes; intake-sources' handler)
 *   GET  /v1/fleet                    task and parked counts, outbox lag, queue depths, fleet stops (role `operator`)
 *   GET|POST /v1/fleet/stop, POST /v1/fleet/resume   the fleet-wide stop (role `operator`; fleetStop.ts)
 *
 * Authentication: `Authorization: Bearer <token>`, hashed and looked up in the fleet config's
 * principals, or the console's session cookie with X-CSRF-Token on mutations (@everdict/http-api's
 * authenticateRequest: one implementation for the whole surface).
 * Ownership: a principal's `customers` (absent = every customer) bounds every read and write;
 * a case, ledger or question of another customer is "not found" (404), never "forbidden", so
 * its existence does not leak. Webhooks authenticate by their HMAC signature instead of a
 * bearer token; nothing is stored unless it verifies.
 * Errors are `{"error", "message", "field"?}`: 400 malformed (naming the field), 401, 403,
 * 404, 409, 413 (body limit), 415, 422 (well-formed but unusable, e.g. an unknown case type),
 * 503 `fleet_stopped` (a fleet soft stop admits no new case; Retry-After).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CANCEL_MODES, CASE_STATES, canonicalJson, isEverdictError, isOneOf, isUuid, sha256Hex } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { RequestError, authenticateRequest, integerParam, readJsonObject, refuseBadQueryText, readRawBody, seesCustomer, sendError, sendJson, sendRequestError } from '@everdict/http-api';
import type { Principal, PrincipalDirectory, WebSessionLookup } from '@everdict/http-api';
import { WebhookUnauthenticated, apiOriginKey, oneLineTitle, webhookHttpStatus } from '@everdict/intake-sources';
import type { NormalisedArrival, WebhookHandler } from '@everdict/intake-sources';
import type { RouteHandler } from '@everdict/service-kit';
import { enqueuePlatformMessage, fleetCounts, listCases, loadCase, loadCaseDetail, loadCaseGateRoles, loadCasePapers, loadLeaseHolders, loadQuestion, loadSession, rootTaskOf, setSessionState, stopCase, verifyCaseLedger } from '@everdict/store';
import type { CaseRow, Store } from '@everdict/store';
import type { IntakeMetrics } from './metrics.js';
import { INTAKE_SERVICE, openCase } from './open.js';
import { fleetStopRoute, fleetStopsView, sendFleetStopped } from './fleetStop.js';
import { resumeCase, topUpCase } from './operatorControls.js';
import { closeRoute, loadNotifications } from './channels.js';
import { caseStateFilter, caseView, ledgerView, listView } from './views.js';
import { exceptionsRoute, replayRoute } from './exceptions.js';
import type { DeadLetterBroker } from './exceptions.js';
import { streamCursor, streamLedger } from './ledgerStream.js';
import type { LedgerFeed, LedgerStreamTiming } from './ledgerStream.js';
import { webSessionRoute } from './webSession.js';
import { NotController, operateAs, sendNotController, sessionView, takeoverRoute } from './sessions.js';

export interface QueueDepth {
  readonly queue: string;
  readonly messages: number;
  readonly consumers: number;
}

interface IntakeApiOptions {
  readonly store: Store;
  readonly fleet: () => FleetConfig;
  readonly principals: () => PrincipalDirectory;
  readonly metrics: IntakeMetrics;
  /** The ticket webhook handler (absent: /v1/intake/* answers 404). */
  readonly webhooks?: WebhookHandler | undefined;
  /** A configured webhook source's body limit in bytes; undefined = no such source (404 before reading). */
  readonly webhookBodyLimit?: ((source: string) => number | undefined) | undefined;
  /** Queue depths for `GET /v1/fleet` (absent: none reported). */
  readonly queueDepths?: (() => Promise<QueueDepth[]>) | undefined;
  /** Largest accepted JSON body in bytes (default 256 KiB). Webhooks use their source's limit. */
  readonly maxBodyBytes?: number;
  /** Console sessions (absent: bearer tokens only, and /v1/session answers 404). */
  readonly webSessions?: WebSessionLookup | undefined;
  /** Lifetime of a new console session in ms (default 12 h). */
  readonly webSessionTtlMs?: number | undefined;
  /** Wakes live ledger streams (absent: /v1/cases/:id/ledger/stream answers 404). */
  readonly ledgerFeed?: LedgerFeed | undefined;
  readonly ledgerStreamTiming?: LedgerStreamTiming | undefined;
  /** Aborted at shutdown: open streams end. */
  readonly signal?: AbortSignal | undefined;
  /** Dead letters for /v1/exceptions and replay (absent: reported unavailable). */
  readonly deadLetters?: DeadLetterBroker | undefined;
}

/** The role `GET /v1/fleet` needs. */
const OPERATOR_ROLE = 'operator';
const DEFAULT_INTAKE_MAX_BODY_BYTES = 256 * 1024;

const CLIENT_KEY = /^[\x21-\x7e]{1,200}$/;
const CUSTOMER = /^[\x21-\x7e\u00a0-\uffff]{1,200}$/;
const MAX_TITLE = 300;
const MAX_TEXT = 100_000;

export function intakeApi(opts: IntakeApiOptions): RouteHandler {
  const maxBody = opts.maxBodyBytes ?? DEFAULT_INTAKE_MAX_BODY_BYTES;
  return async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://intake.invalid');
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] !== 'v1' || !['cases', 'questions', 'intake', 'fleet', 'session', 'exceptions', 'dead-letters'].includes(parts[1] ?? '')) return false;
    try {
      refuseBadQueryText(url.searchParams);
      if (parts[1] === 'session') {
        if (parts.length !== 2 || !opts.webSessions) return (sendError(res, 404, 'not_found', 'no such route'), true);
        return await webSessionRoute({ store: opts.store, principals: opts.principals, sessions: opts.webSessions, maxBodyBytes: maxBody, ...(opts.webSessionTtlMs ? { ttlMs: opts.webSessionTtlMs } : {}) }, req, res);
      }
      if (parts[1] === 'intake') {
        if (parts.length !== 3) return (sendError(res, 404, 'not_found', 'no such route'), true);
        if (req.method !== 'POST') return (sendError(res, 405, 'method_not_allowed', `${req.method ?? ''} is not allowed here`), true);
        await webhook(opts, parts[2]!, req, res);
        return true;
      }
      const principal = await authenticateRequest(req, res, opts.principals(), opts.webSessions);
      if (!principal) return true;
      await route(opts, maxBody, principal, parts, url, req, res);
      return true;
    } catch (err) {
      if (err instanceof RequestError) return (sendRequestError(res, err), true);
      if (err instanceof NotController) return (sendNotController(res, err), true);
      if (isEverdictError(err, 'fleet_stopped')) {
        opts.metrics.refused(parts[1] === 'intake' ? 'webhook' : 'api', 503);
        return (sendFleetStopped(res, err), true);
      }
      if (isEverdictError(err, 'unknown_case_type') || isEverdictError(err, 'unknown_profile')) {
        const field = (err.details as { field?: string } | undefined)?.field;
        return (sendError(res, 422, err.code, err.message, field), true);
      }
      throw err;
    }
  };
}

async function route(opts: IntakeApiOptions, maxBody: number, principal: Principal, parts: string[], url: URL, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const m = req.method ?? '';
  const [, group, id, sub] = parts;
  if (group === 'exceptions' && parts.length === 2) {
    if (m !== 'GET') return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
    return exceptionsRoute({ store: opts.store, broker: opts.deadLetters }, principal, res);
  }
  if (group === 'dead-letters' && id !== undefined && sub === 'replay' && parts.length === 4) {
    if (m !== 'POST') return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
    return replayRoute({ store: opts.store, broker: opts.deadLetters }, principal, decodeURIComponent(id), res);
  }
  if (group === 'exceptions' || group === 'dead-letters') return sendError(res, 404, 'not_found', 'no such route');
  if (group === 'cases' && id !== undefined && sub === 'ledger' && parts[4] === 'stream' && parts.length === 5 && opts.ledgerFeed) {
    if (m !== 'GET') return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
    const row = isUuid(id) ? await loadCase(opts.store.db, id) : undefined;
    if (!row || !seesCustomer(principal, row.customer)) return sendError(res, 404, 'case_not_found', 'no such case');
    const after = streamCursor(url, req.headers['last-event-id']);
    return streamLedger(req, res, { store: opts.store, feed: opts.ledgerFeed, caseId: row.id, after, signal: opts.signal ?? new AbortController().signal, ...(opts.ledgerStreamTiming ? { timing: opts.ledgerStreamTiming } : {}) });
  }
  if (group === 'fleet' && parts.length === 2) {
    if (m !== 'GET') return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
    return fleet(opts, principal, res);
  }
  if (group === 'fleet' && parts.length === 3 && (await fleetStopRoute(opts.store, principal, id!, m, () => readJsonObject(req, maxBody), res))) return;
  if (group === 'cases' && parts.length === 2) {
    if (m === 'POST') return createCase(opts, principal, await readJsonObject(req, maxBody), req, res);
    if (m === 'GET') return listCasesRoute(opts, principal, url, res);
    return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
  }
  if (group === 'cases' && id !== undefined && sub === 'ledger' && parts[4] === 'verify' && parts.length === 5) {
    if (m !== 'GET') return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
    const row = isUuid(id) ? await loadCase(opts.store.db, id) : undefined;
    if (!row || !seesCustomer(principal, row.customer)) return sendError(res, 404, 'case_not_found', 'no such case');
    return sendJson(res, 200, await verifyCaseLedger(opts.store.db, row.id));
  }
  if (group === 'cases' && id !== undefined && sub === 'session' && parts[4] === 'takeover' && parts.length === 5) {
    if (m !== 'POST') return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
    const row = isUuid(id) ? await loadCase(opts.store.db, id) : undefined;
    if (!row || !seesCustomer(principal, row.customer)) return sendError(res, 404, 'case_not_found', 'no such case');
    return takeoverRoute(opts.store, principal, row, await readJsonObject(req, maxBody), res);
  }
  if (group === 'cases' && id !== undefined && sub === 'close' && parts.length === 4) {
    if (m !== 'POST') return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
    const row = isUuid(id) ? await loadCase(opts.store.db, id) : undefined;
    if (!row || !seesCustomer(principal, row.customer)) return sendError(res, 404, 'case_not_found', 'no such case');
    return closeRoute(opts.store, principal, row.id, res);
  }
  if (group === 'cases' && id !== undefined && parts.length <= 4) {
    const known = parts.length === 3 || sub === 'ledger' || sub === 'cancel' || sub === 'resume' || sub === 'top-up';
    if (!known) return sendError(res, 404, 'not_found', 'no such route');
    const expected = sub === undefined || sub === 'ledger' ? 'GET' : 'POST';
    if (m !== expected) return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
    const row = isUuid(id) ? await loadCase(opts.store.db, id) : undefined;
    if (!row || !seesCustomer(principal, row.customer)) return sendError(res, 404, 'case_not_found', 'no such case');
    if (sub === undefined) {
      const [detail, session, notifications, papers, gateRoles] = await Promise.all([
        loadCaseDetail(opts.store.db, row.id),
        loadSession(opts.store.db, row.id),
        loadNotifications(opts.store.db, row.id),
        loadCasePapers(opts.store.db, row.id),
        loadCaseGateRoles(opts.store.db, row.id),
      ]);
      return sendJson(res, 200, { ...caseView(row, detail, { papers, gateRoles }), session: sessionView(row, session), notifications });
    }
    if (sub === 'ledger') return ledger(opts, row, url, res);
    if (sub === 'resume') return resumeCase(opts.store, principal, row, await readJsonObject(req, maxBody), res);
    if (sub === 'top-up') return topUpCase(opts.store, principal, row, await readJsonObject(req, maxBody), res);
    return cancel(opts, principal, row, await readJsonObject(req, maxBody), res);
  }
  if (group === 'questions' && id !== undefined && sub === 'answer' && parts.length === 4) {
    if (m !== 'POST') return sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`);
    return answer(opts, principal, id, await readJsonObject(req, maxBody), res);
  }
  sendError(res, 404, 'not_found', 'no such route');
}

// ------------------------------------------------------------------------------- open a case

function optionalText(body: Record<string, unknown>, field: string, max: number): string | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v.length > max) throw new RequestError(400, 'invalid_body', `${field} must be a string of at most ${max} characters`, field);
  return v;
}

/** The customer a new case belongs to: named, or the principal's only one; always one it may see. */
function resolveCustomer(principal: Principal, named: string | undefined): string {
  if (named !== undefined) {
    if (!CUSTOMER.test(named)) throw new RequestError(400, 'invalid_body', 'customer must be 1–200 printable characters without whitespace or control characters', 'customer');
    if (!seesCustomer(principal, named)) throw new RequestError(403, 'customer_forbidden', 'the principal may not open cases for that customer', 'customer');
    return named;
  }
  if (principal.customers !== null && principal.customers.length === 1) return principal.customers[0]!;
  throw new RequestError(400, 'invalid_body', 'customer is required (the principal is not bound to exactly one customer)', 'customer');
}

async function createCase(opts: IntakeApiOptions, principal: Principal, body: Record<string, unknown>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const caseType = body['caseType'];
  if (typeof caseType !== 'string' || caseType.length === 0 || caseType.length > 64) throw new RequestError(400, 'invalid_body', 'caseType must be a case type name', 'caseType');
  const title = body['title'];
  if (typeof title !== 'string' || title.trim().length === 0 || title.length > MAX_TITLE) throw new RequestError(400, 'invalid_body', `title must be a non-empty string of at most ${MAX_TITLE} characters`, 'title');
  const objective = optionalText(body, 'objective', MAX_TEXT);
  const material = optionalText(body, 'material', MAX_TEXT);
  const customer = resolveCustomer(principal, optionalText(body, 'customer', 200));
  if (!opts.fleet().caseTypes[caseType]) throw new RequestError(422, 'unknown_case_type', `case type ${caseType} is not in the fleet config`, 'caseType');

  // The client's key (body, else Idempotency-Key), else the request's content: a client that
  // retries the same request without a key still opens one case. Keys are scoped to the
  // principal, so one principal's key can never answer another principal's case.
  const header = req.headers['idempotency-key'];
  const named = optionalText(body, 'originKey', 200) ?? (typeof header === 'string' ? header : undefined);
  if (named !== undefined && !CLIENT_KEY.test(named)) throw new RequestError(400, 'invalid_body', 'originKey (or Idempotency-Key) must be 1–200 printable ASCII characters', typeof body['originKey'] === 'string' ? 'originKey' : 'Idempotency-Key');
  const clientKey = named ?? `sha256:${sha256Hex(canonicalJson({ caseType, title, objective: objective ?? null, material: material ?? null, customer }))}`;

  const arrival: NormalisedArrival = {
    source: 'api',
    originKey: apiOriginKey(principal.id, clientKey),
    customer,
    title: oneLineTitle(title, caseType),
    body: [objective, material].filter((s): s is string => s !== undefined && s.length > 0).join('\n\n'),
    receivedAt: new Date().toISOString(),
    attachments: [],
    raw: { kind: 'api', principal: principal.id, clientKey },
  };
  const opened = await openCase(opts.store, opts.fleet(), { arrival, caseType, customer, principal: principal.id });
  opts.metrics.opened('api', opened.created);
  sendJson(res, opened.created ? 201 : 200, { caseId: opened.caseId, created: opened.created, ...(opened.rootTaskId ? { rootTaskId: opened.rootTaskId } : {}) });
}

// ------------------------------------------------------------------------------- reads

async function listCasesRoute(opts: IntakeApiOptions, principal: Principal, url: URL, res: ServerResponse): Promise<void> {
  const limit = integerParam(url.searchParams, 'limit', { min: 1, max: 500, default: 50 });
  const state = caseStateFilter(url.searchParams.get('state'));
  if (state === undefined) throw new RequestError(400, 'invalid_query', `state must be one of ${CASE_STATES.join(', ')}`, 'state');
  const beforeId = url.searchParams.get('before');
  if (beforeId !== null && !isUuid(beforeId)) throw new RequestError(400, 'invalid_query', 'before must be a `next` value of an earlier page', 'before');
  const customer = textFilter(url, 'customer', 200);
  const parkReason = textFilter(url, 'parkReason', 64);
  const origin = textFilter(url, 'origin', 400);
  const text = textFilter(url, 'q', 200);
  // A cursor naming a case the principal may not see pages nothing of it: the filter still applies.
  const rows = await listCases(opts.store.db, { customers: principal.customers, limit, beforeId, state, customer, parkReason, origin, text });
  sendJson(res, 200, listView(rows, limit));
}

/** An optional text filter of the case list: null when absent or empty, 400 naming it when too long. */
function textFilter(url: URL, name: string, max: number): string | null {
  const v = url.searchParams.get(name);
  if (v === null || v === '') return null;
  if (v.length > max) throw new RequestError(400, 'invalid_query', `${name} must be at most ${max} characters`, name);
  return v;
}

async function ledger(opts: IntakeApiOptions, row: CaseRow, url: URL, res: ServerResponse): Promise<void> {
  // Sequence numbers are bigint; a JS-safe integer is far beyond any ledger and inside bigint.
  const after = integerParam(url.searchParams, 'after', { min: 0, default: 0 });
  const limit = integerParam(url.searchParams, 'limit', { min: 1, max: 1000, default: 100 });
  sendJson(res, 200, ledgerView(row.id, await opts.store.readLedger(row.id, after, limit), limit));
}

async function fleet(opts: IntakeApiOptions, principal: Principal, res: ServerResponse): Promise<void> {
  if (!principal.roles.includes(OPERATOR_ROLE)) return sendError(res, 403, 'forbidden', `the fleet view needs the role ${OPERATOR_ROLE}`);
  const [counts, outbox, queues, stops, leases] = await Promise.all([
    fleetCounts(opts.store.db),
    opts.store.outboxLag(),
    opts.queueDepths ? opts.queueDepths() : Promise.resolve([]),
    fleetStopsView(opts.store.db),
    loadLeaseHolders(opts.store.db),
  ]);
  // Liveness without a registry: a queue's consumers are its live subscribers, and a worker
  // holding an unexpired task lease is running turns right now.
  const workers = leases.map((l) => ({ owner: l.owner, runningTasks: l.tasks, leaseUntil: l.until.toISOString() }));
  sendJson(res, 200, { tasks: counts.tasks, parked: counts.parked, outbox, queues, stops, workers });
}

// ------------------------------------------------------------------------------- writes

async function cancel(opts: IntakeApiOptions, principal: Principal, row: CaseRow, body: Record<string, unknown>, res: ServerResponse): Promise<void> {
  const mode = body['mode'] ?? 'hard';
  if (!isOneOf(CANCEL_MODES, mode)) throw new RequestError(400, 'invalid_body', `mode must be one of ${CANCEL_MODES.join(', ')}`, 'mode');
  const reason = optionalText(body, 'reason', 2000);
  // A cancelled case takes a repeated cancel: it is answered with the stop in force (never weakened).
  if (row.state === 'closed' || row.state === 'resolved') throw new RequestError(409, 'case_finished', `the case is already ${row.state}`);
  const result = await opts.store.unitOfWork(async (uow) => {
    await operateAs(uow, row.id, principal);
    // Concurrent stops of the case serialise in stopCase; a stop never weakens (hard stays hard).
    const { stopMode } = await stopCase(uow, row.id, mode);
    // Any stop halts the session's live execution; a soft one may be resumed, a hard one is final.
    await setSessionState(uow, row.id, 'stopped', `case_cancel_${stopMode}`, principal.id);
    const root = await rootTaskOf(uow, row.id);
    const messageId = root ? await enqueuePlatformMessage(uow, INTAKE_SERVICE, 'task.cancel', row.id, { taskId: root, mode, requestedBy: principal.id, ...(reason ? { reason } : {}) }) : null;
    await uow.appendLedger(row.id, { kind: 'case_cancel_requested', body: { mode, stopMode, requestedBy: principal.id, rootTaskId: root } });
    return { stopMode, rootTaskId: root, messageId };
  });
  sendJson(res, 202, { caseId: row.id, mode, stopMode: result.stopMode, rootTaskId: result.rootTaskId });
}

async function answer(opts: IntakeApiOptions, principal: Principal, questionId: string, body: Record<string, unknown>, res: ServerResponse): Promise<void> {
  const text = body['answer'];
  if (typeof text !== 'string' || text.trim().length === 0 || text.length > 16000) throw new RequestError(400, 'invalid_body', 'answer must be a non-empty string of at most 16000 characters', 'answer');
  const chosen = body['chosenAlternative'];
  if (chosen !== undefined && (typeof chosen !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/.test(chosen))) throw new RequestError(400, 'invalid_body', 'chosenAlternative must be an alternative id', 'chosenAlternative');
  const q = isUuid(questionId) ? await loadQuestion(opts.store.db, questionId) : undefined;
  if (!q || !seesCustomer(principal, q.customer)) return sendError(res, 404, 'question_not_found', 'no such question');
  if (q.answer !== null) return sendError(res, 409, 'question_answered', 'the question has already been answered');
  // The turn-worker records the answer (first wins) when it applies question.answered; intake
  // only authenticates, checks ownership and enqueues it with the answering principal.
  const messageId = await opts.store.unitOfWork(async (uow) => {
    await operateAs(uow, q.case_id, principal);
    const id = await enqueuePlatformMessage(uow, INTAKE_SERVICE, 'question.answered', q.case_id, {
      questionId: q.id,
      taskId: q.task_id,
      answer: text,
      answeredBy: principal.id,
      ...(typeof chosen === 'string' ? { chosenAlternative: chosen } : {}),
    });
    await uow.appendLedger(q.case_id, { kind: 'answer_submitted', body: { questionId: q.id, taskId: q.task_id, answeredBy: principal.id, messageId: id } });
    return id;
  });
  sendJson(res, 202, { questionId: q.id, caseId: q.case_id, messageId });
}

// ------------------------------------------------------------------------------- webhooks

async function webhook(opts: IntakeApiOptions, source: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const limit = opts.webhookBodyLimit?.(source);
  if (!opts.webhooks || limit === undefined) return sendError(res, 404, 'unknown_source', 'no such webhook source');
  try {
    // An unauthenticated sender gets no more buffered than the source accepts.
    const rawBody = await readRawBody(req, limit);
    const out = await opts.webhooks.handle({ source, headers: req.headers, rawBody });
    if (out.status === 202) return sendJson(res, 202, { ignored: out.ignored });
    sendJson(res, out.status, { caseId: out.caseId, created: out.created });
  } catch (err) {
    const status = err instanceof RequestError ? err.status : webhookHttpStatus(err);
    if (status === 500) {
      if (isEverdictError(err, 'invalid_arrival') || isEverdictError(err, 'unknown_case_type')) {
        opts.metrics.refused('webhook', 422);
        return sendError(res, 422, err.code, err.message, (err.details as { field?: string } | undefined)?.field);
      }
      throw err;
    }
    opts.metrics.refused('webhook', status);
    if (err instanceof WebhookUnauthenticated) res.setHeader('www-authenticate', 'Signature');
    const e = err as { code?: string; message?: string; error?: string };
    sendError(res, status, e.code ?? e.error ?? 'refused', e.message ?? 'refused');
  }
}
