/**
 * The auditor's own reads (seed 004 §3, K1): the auditor profile may check the cited evidence
 * with the read tools IT declares (`reads`, read-only MCP tools), and every such call goes
 * through the same checks and the same journal as any read of an agent.
 *
 * Keying: an audit runs inside the proposing task's turn (one proposal per turn), so its reads
 * are journalled under that task and turn, at ordinals from AUDIT_ORDINAL_BASE up — far above
 * any ordinal the kernel gives a model's tool call (1..n of one response), so the two never
 * meet. Each read is written intent-first (before it runs) and its outcome right after it (not
 * with the turn's commit), by its own fenced write: a worker that lost the task cannot add one.
 *
 * Replay: a resumed turn audits again; a read of the same tool with the same arguments that
 * this turn's audit already completed is answered from the journal and never runs twice; an
 * intent a crash left open is run again under its call id (a read is safe to repeat).
 *
 * Checks before anything runs, each a `refused` journal row the auditor is told about: the tool
 * must be a read; the case's scope must authorise it (authorizeToolInvocation); it must not
 * need consent (the auditor never asks: a consent-requiring read is refused); its arguments
 * must match its input schema.
 */
import { authorizeToolInvocation, callStatusForOutcome, canonicalJson, newId, permissionRequired } from '@everdict/contracts';
import type { ExecutionEnvelope, ToolOutcome } from '@everdict/contracts';
import type { Tool, ToolRegistry } from '@everdict/agent-runtime';
import { contentHash, loadTurnCalls, newPaper, Store, writeTurn } from '@everdict/store';
import type { Db, FenceToken, NewCallIntent } from '@everdict/store';

/** The first ordinal of an audit's reads within the proposing task's turn. */
export const AUDIT_ORDINAL_BASE = 1_000_000;

export interface AuditJournalScope {
  readonly db: Db;
  readonly token: FenceToken;
  readonly caseId: string;
  readonly turn: number;
  readonly envelope: Pick<ExecutionEnvelope, 'scope'>;
  /** The auditor as "<name>@<version>" (recorded as the calls' versions). */
  readonly by: string;
}

export interface AuditReadResult {
  readonly content: string;
  readonly isError: boolean;
  readonly callId: string;
  /** True when the answer came from the journal (the read did not run again). */
  readonly replayed: boolean;
}

const bytesOf = (value: unknown) => Buffer.from(canonicalJson(value ?? null), 'utf8');

/** Why a call may not run for the auditor (null: it may). Pure. */
export function auditReadRefusal(tool: Tool | undefined, name: string, args: unknown, envelope: Pick<ExecutionEnvelope, 'scope'>, registry: Pick<ToolRegistry, 'argumentProblems'>): string | null {
  if (tool === undefined) return `tool ${name} is not one of the auditor's read tools`;
  const d = tool.descriptor;
  if (d.access !== 'read') return `tool ${name} is not a read`;
  const auth = authorizeToolInvocation(d, envelope);
  if (!auth.allowed) return `tool ${name} is outside this case's scope (${auth.refusal})`;
  if (permissionRequired(d).required) return `tool ${name} needs consent, which an audit never asks for`;
  const problems = registry.argumentProblems(name, args);
  if (problems.length > 0) return `arguments of ${name} are invalid: ${problems.slice(0, 5).join('; ')}`;
  return null;
}

/** The tool-call record shape the kernel journals, so ledgers and replays read audit rows alike. */
const record = (content: string, outcome: ToolOutcome) => ({ content, effect: null, offloadedRef: null, outcome, refusal: null });

/** Runs (or replays) one auditor read, journalled as described in the header. */
export async function runAuditRead(scope: AuditJournalScope, tools: ReadonlyMap<string, Tool>, registry: Pick<ToolRegistry, 'argumentProblems'>, name: string, args: unknown, signal?: AbortSignal): Promise<AuditReadResult> {
  const store = new Store(scope.db);
  const requestBytes = bytesOf({ tool: name, arguments: args });
  const requestHash = contentHash(requestBytes);
  const rows = (await loadTurnCalls(scope.db, scope.token.taskId, scope.turn)).filter((r) => r.ordinal >= AUDIT_ORDINAL_BASE);
  const same = rows.find((r) => r.toolName === name && r.requestHash === requestHash && (r.status === 'completed' || r.status === 'intent'));
  if (same?.status === 'completed' && same.response !== null) {
    const rec = JSON.parse(same.response.toString('utf8')) as { content?: unknown; outcome?: unknown };
    return { content: typeof rec.content === 'string' ? rec.content : '', isError: rec.outcome !== 'ok', callId: same.id, replayed: true };
  }
  const ordinal = same?.ordinal ?? Math.max(AUDIT_ORDINAL_BASE - 1, ...rows.map((r) => r.ordinal)) + 1;
  const callId = same?.id ?? newId();
  const req = newPaper({ kind: 'artefact', name: `calls/${callId}/request`, schemaId: 'everdict/tool-request.v1', bytes: requestBytes });
  const intent: NewCallIntent = { id: callId, turn: scope.turn, ordinal, kind: 'read', toolName: name, requestPaperId: req.id, requestHash: req.contentHash, route: null, versions: { auditor: scope.by } };
  const settle = (content: string, outcome: ToolOutcome) => {
    const rec = record(content, outcome);
    const response = newPaper({ kind: 'artefact', name: `calls/${callId}/response/${newId()}`, schemaId: 'everdict/tool-result.v1', bytes: bytesOf(rec) });
    return { response, done: { id: callId, status: callStatusForOutcome(outcome), responsePaperId: response.id, responseHash: response.contentHash, route: null, outcomeClass: outcome } };
  };

  const tool = tools.get(name);
  const refusal = auditReadRefusal(tool, name, args, scope.envelope, registry);
  if (refusal !== null) {
    const { response, done } = settle(`Refused: ${refusal}.`, 'refused');
    const { id: _id, route: _route, ...settled } = done;
    if (same === undefined) await store.unitOfWork((uow) => writeTurn(uow, scope.token, scope.caseId, { papers: [req, response], completions: [], intents: [{ ...intent, settled }], checkpoint: null, ledger: null }));
    else await store.unitOfWork((uow) => writeTurn(uow, scope.token, scope.caseId, { papers: [response], completions: [done], intents: [], checkpoint: null, ledger: null }));
    return { content: `Refused: ${refusal}.`, isError: true, callId, replayed: false };
  }

  if (same === undefined) await store.unitOfWork((uow) => writeTurn(uow, scope.token, scope.caseId, { papers: [req], completions: [], intents: [intent], checkpoint: null, ledger: null }));
  let content: string;
  let outcome: ToolOutcome;
  try {
    const out = await tool!.invoke(args as Readonly<Record<string, unknown>>, { taskId: scope.token.taskId, turn: scope.turn, callId, ...(signal ? { signal } : {}) });
    content = out.content;
    outcome = out.isError === true ? 'tool_error' : 'ok';
  } catch (err) {
    // A target without a reply is the auditor's evidence gap, not the proposing task's outage.
    content = `Tool ${name} failed: ${err instanceof Error ? err.message : String(err)}`;
    outcome = 'tool_error';
  }
  const { response, done } = settle(content, outcome);
  await store.unitOfWork((uow) => writeTurn(uow, scope.token, scope.caseId, { papers: [response], completions: [done], intents: [], checkpoint: null, ledger: null }));
  return { content, isError: outcome !== 'ok', callId, replayed: false };
}

