/**
 * The kernel's Journal port on Postgres, for ONE turn of one task, grouping writes so a turn
 * costs few commits (seed 004 §2.1; the commit plan is in turn.ts):
 *
 *   C1  recordIntent(ordinal 0)  → request paper + model intent (+ pinned notes), committed
 *                                  BEFORE the model is called;
 *   C2  first tool intents       → the model's response + every intent of the first batch of
 *                                  calls, committed BEFORE any of them runs. A later batch
 *                                  commits its intents the same way before it runs, and that
 *                                  same statement carries every outcome produced so far (with
 *                                  the offloaded results they cite): a completed read is durable
 *                                  before the next batch starts, so a worker that dies in a
 *                                  later batch leaves it completed and it is replayed, never run
 *                                  again (seed 004 §2.2) — at no extra commit;
 *   C3  tool outcomes            → the outcomes not yet written, by the turn's write, with the
 *                                  checkpoint and outbox (turnWrite.ts). A call the kernel
 *                                  withheld on sight (rejected document, scope, shadow mode)
 *                                  has no C2 intent: its row is inserted already settled by
 *                                  the next of these writes, so a refusal costs no round trip.
 *                                  So has a batch folded into the next write (durability.ts:
 *                                  calls nobody outside the process observes, with no earlier
 *                                  journalled outcome waiting): its C2 is never written.
 *
 * A call already in the journal (a resumed turn) is answered from the journal: a completed call
 * is replayed, never executed again; an open intent keeps its call id.
 */
import { canonicalJson, EverdictError, newId, ownedUtf8 } from '@everdict/contracts';
import type { CallStatus } from '@everdict/contracts';
import type { CallIntent, CallOutcome, CallRecord, Journal, JournalKey, ToolRegistry } from '@everdict/agent-runtime';
import type { ModelReply, ModelRequest, RouteIdentity } from '@everdict/llm';
import { contentHash, manifestPaper, newPaper, pinNotesToTurn, spannedPaper, supersedeIntent, writeTurn } from '@everdict/store';
import { mayDeferIntents, mayFoldIntents } from './durability.js';
import type { CallCompletion, FenceToken, ModelCallCost, JournalCommitter, NewCallIntent, NewPaper, Store, StoredCall } from '@everdict/store';
import { requestDocument } from './canonical.js';
import type { SplicedDocument } from './canonical.js';
import type { CrashPoints } from './crashpoints.js';
import { RestoreFailure } from './statePaper.js';
import type { Versions } from './versions.js';

const PAPER_SCHEMAS = {
  modelRequest: 'everdict/model-request.v1',
  modelResponse: 'everdict/model-response.v1',
  toolRequest: 'everdict/tool-request.v1',
  toolResult: 'everdict/tool-result.v1',
} as const;

interface TurnScope {
  readonly store: Store;
  /** Group commit shared by the process's running turns. */
  readonly committer: JournalCommitter;
  readonly token: FenceToken;
  readonly caseId: string;
  readonly turn: number;
  readonly versions: Versions;
  /** The route serving this turn's model call (recorded on the call). */
  readonly route: string;
  /** The route's configured model: a cost row's model when the provider does not name one. */
  readonly routeModel: string;
  readonly registry: ToolRegistry;
  /** The journal rows of this turn found at restore (empty for a fresh turn). */
  readonly stored: ReadonlyMap<number, StoredCall>;
  /** The model intent the previous turn's commit already wrote for this turn, if any. */
  readonly prewritten: CallRecord | null;
  /** Notes the turn's request carries, pinned to it with the model intent. */
  readonly notesToPin: readonly number[];
  readonly crash: CrashPoints;
  /** The turn's offloaded results: the papers an outcome written before C3 cites go with it. */
  readonly results: { takeResults(taskId: string, refs: readonly string[]): NewPaper[] };
  /** Counts this turn's commits (the benchmark's commits per turn). */
  readonly onCommit: () => void;
}

export interface PendingOutcome {
  readonly done: CallCompletion;
  readonly response: NewPaper;
  /**
   * The call's row when its intent is not in the journal (a withheld call, or a folded batch's),
   * inserted already settled by the same write (its `settled` is `done`); null when the call's
   * intent is in the journal and `done` completes it.
   */
  readonly unjournalled: IntentRow | null;
}

/** What a write carries for `outcomes`: response papers, completions of journalled intents, settled rows of the others. */
export function outcomeRows(outcomes: readonly PendingOutcome[]): { papers: NewPaper[]; completions: CallCompletion[]; intents: NewCallIntent[] } {
  return {
    papers: outcomes.flatMap((o) => (o.unjournalled ? [o.unjournalled.request, o.response] : [o.response])),
    completions: outcomes.filter((o) => o.unjournalled === null).map((o) => o.done),
    intents: outcomes.flatMap((o) => (o.unjournalled ? [o.unjournalled.call] : [])),
  };
}

/** A call intent row and its request paper, ready for `writeTurn`. */
interface IntentRow {
  readonly call: NewCallIntent;
  readonly request: NewPaper;
}

function parse(bytes: Buffer | null, callId: string): unknown {
  if (bytes === null) return null;
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new RestoreFailure('journal_corrupt', `journal paper of call ${callId} is not JSON`, { callId });
  }
}

function recordOf(taskId: string, s: StoredCall): CallRecord {
  return {
    taskId,
    turn: s.turn,
    ordinal: s.ordinal,
    callId: s.id,
    kind: s.ordinal === 0 ? 'model' : 'tool',
    name: s.toolName ?? s.route ?? '',
    request: parse(s.request, s.id),
    requestHash: s.requestHash ?? '',
    status: s.status as CallStatus,
    response: parse(s.response, s.id),
    responseHash: s.responseHash,
  };
}

/** The result paper a tool outcome's record cites (K6), if it was offloaded. */
function offloadedRefOf(response: unknown): string[] {
  const ref = (response as { offloadedRef?: unknown } | null)?.offloadedRef;
  return typeof ref === 'string' ? [ref] : [];
}

// A call's request bytes are kept until its outcome is written (a slow tool's: seconds).
const bytesOf = (value: unknown) => ownedUtf8(canonicalJson(value ?? null));

/**
 * Whether two model request documents are the same request by construction: the same message
 * list object, prompt, output cap, tool descriptors (by identity of their schemas) and route.
 * Only a request built from the same committed state passes; anything else is hashed anew.
 */
function sameRequest(a: { readonly route: RouteIdentity; readonly request: ModelRequest } | null | undefined, b: { readonly route: RouteIdentity; readonly request: ModelRequest }): boolean {
  if (a == null || typeof a !== 'object' || a.request == null) return false;
  const x = a.request;
  const y = b.request;
  if (x.messages !== y.messages || x.system !== y.system || x.maxOutputTokens !== y.maxOutputTokens || x.tools.length !== y.tools.length) return false;
  if (Object.keys(x).length !== Object.keys(y).length) return false;
  for (let i = 0; i < x.tools.length; i++) {
    const s = x.tools[i]!;
    const t = y.tools[i]!;
    if (s.name !== t.name || s.description !== t.description || s.inputSchema !== t.inputSchema) return false;
  }
  const r = a.route;
  const q = b.route;
  return r.name === q.name && r.adapter === q.adapter && r.model === q.model && r.configHash === q.configHash;
}

/** The request document of a model intent, split around its messages when it can be (null: stored whole). */
export function modelRequestDocument(taskId: string, doc: { readonly route: RouteIdentity; readonly request: ModelRequest }, toolsOwner: object): SplicedDocument | null {
  return requestDocument(taskId, doc.route, doc.request, toolsOwner);
}

/**
 * The journal row of a model intent: its exact request as a paper, the route and versions. The
 * paper is a history manifest (its messages stored once each as blocks, the new ones carried
 * with it) whose content hash — the call's request hash — is the sha256 of the exact request
 * bytes. `form` is the request's document when the caller built it already (one per turn).
 */
export function modelIntentRow(intent: CallIntent, route: string, versions: Versions, form?: SplicedDocument | null): IntentRow {
  const doc = intent.request as { route: RouteIdentity; request: ModelRequest };
  const spliced = form !== undefined ? form : modelRequestDocument(intent.taskId, doc, doc.request.tools);
  const name = `calls/${intent.callId}/request`;
  const request =
    spliced === null
      ? newPaper({ kind: 'artefact', name, schemaId: PAPER_SCHEMAS.modelRequest, bytes: bytesOf(intent.request) })
      : // The suffix (prompt, tool schemas, route) is the same every turn of an agent: a tail block.
        manifestPaper({ kind: 'artefact', name, schemaId: PAPER_SCHEMAS.modelRequest, before: spliced.before, items: spliced.items, after: spliced.after, hash: spliced.hash, tail: true });
  return {
    call: { id: intent.callId, turn: intent.turn, ordinal: 0, kind: 'model', toolName: null, requestPaperId: request.id, requestHash: request.contentHash, route, versions },
    request,
  };
}

export class TurnJournal implements Journal {
  private readonly records = new Map<number, CallRecord>();
  private modelOutcome: { record: CallRecord; outcome: CallOutcome; written: boolean } | null = null;
  /** `folded`: the call's intent row, not in the journal (its batch was folded), written settled with its outcome. */
  private readonly toolOutcomes: { record: CallRecord; outcome: CallOutcome; folded: IntentRow | null }[] = [];
  /** Intent rows of folded batches whose outcome has not arrived yet, by ordinal. */
  private readonly folded = new Map<number, IntentRow>();
  private readonly withheldCalls: PendingOutcome[] = [];
  /** How many of toolOutcomes / withheldCalls (in order) a write before C3 made durable. */
  private written = { tools: 0, withheld: 0 };
  private queue: { intent: CallIntent; resolve: (r: CallRecord) => void; reject: (e: unknown) => void }[] = [];
  private flushScheduled = false;
  /** The model request document last hashed, with its split form (its intent's paper); null form: not built (the prewritten intent is it). */
  private lastRequest: { readonly doc: object; readonly form: SplicedDocument | null | undefined } | null = null;
  /** Whether any tool outcome was produced in this process (the after_tool_results point). */
  ranTools = false;

  constructor(private readonly scope: TurnScope) {
    for (const [ordinal, s] of scope.stored) this.records.set(ordinal, recordOf(scope.token.taskId, s));
    if (scope.prewritten && !this.records.has(0)) this.records.set(0, scope.prewritten);
  }

  /**
   * payloadHash of the model request document (sha256 of its canonical bytes), computed once per
   * turn: the request the previous turn's commit prewrote is this very request when it was built
   * from the same objects (the committed messages list, prompt, registry, route), and its hash
   * is reused; otherwise it is built from the message forms cached per message (a turn's request
   * repeats every earlier message) and kept for the intent's request paper.
   */
  requestHash(doc: { readonly route: RouteIdentity; readonly request: ModelRequest }): string {
    const pre = this.scope.prewritten;
    if (pre !== null && pre.requestHash !== '' && sameRequest(pre.request as typeof doc, doc)) {
      this.lastRequest = { doc, form: undefined };
      return pre.requestHash;
    }
    const form = modelRequestDocument(this.scope.token.taskId, doc, this.scope.registry);
    this.lastRequest = { doc, form };
    return form === null ? contentHash(bytesOf(doc)) : form.hash;
  }

  async recordIntent(intent: CallIntent): Promise<CallRecord> {
    this.checkKey(intent);
    if (intent.ordinal === 0) return this.recordModelIntent(intent);
    const existing = this.records.get(intent.ordinal);
    if (existing) return existing;
    return new Promise<CallRecord>((resolve, reject) => {
      this.queue.push({ intent, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // Intents of one parallel batch arrive in the same tick: they commit together.
        queueMicrotask(() => void this.flush());
      }
    });
  }

  async recordOutcome(key: JournalKey & { readonly callId: string }, outcome: CallOutcome): Promise<void> {
    this.checkKey(key);
    const rec = this.records.get(key.ordinal);
    if (!rec || rec.callId !== key.callId) throw new EverdictError('journal_unknown_call', `no intent for call ${key.callId}`, { details: { callId: key.callId } });
    if (rec.status !== 'intent' && !(rec.kind === 'model' && rec.status === 'failed')) {
      if (rec.status === outcome.status && rec.responseHash === outcome.responseHash) return;
      throw new EverdictError('journal_outcome_conflict', `call ${key.callId} already settled as ${rec.status}`, { details: { callId: key.callId } });
    }
    const settled: CallRecord = { ...rec, status: outcome.status, response: outcome.response, responseHash: outcome.responseHash };
    this.records.set(key.ordinal, settled);
    if (key.ordinal === 0) {
      this.modelOutcome = { record: settled, outcome, written: false };
      if (outcome.status === 'completed') this.scope.crash.reach('after_model', { taskId: key.taskId, turn: key.turn });
      return;
    }
    this.ranTools = true;
    const folded = this.folded.get(key.ordinal) ?? null;
    this.folded.delete(key.ordinal);
    this.toolOutcomes.push({ record: settled, outcome, folded });
  }

  async recordWithheld(intent: CallIntent, outcome: CallOutcome): Promise<CallRecord> {
    this.checkKey(intent);
    const existing = this.records.get(intent.ordinal);
    if (existing) return existing;
    const row = this.intentRow(intent);
    const rec: CallRecord = { ...intent, requestHash: row.request.contentHash, status: outcome.status, response: outcome.response, responseHash: outcome.responseHash };
    this.records.set(intent.ordinal, rec);
    this.withheldCalls.push(this.completion(rec, outcome, row));
    return rec;
  }

  /** Outcomes the turn's final unit of work must write (response papers + completions, withheld rows): those not durable yet. */
  pendingOutcomes(): PendingOutcome[] {
    const out: PendingOutcome[] = [];
    if (this.modelOutcome && !this.modelOutcome.written) out.push(this.completion(this.modelOutcome.record, this.modelOutcome.outcome));
    out.push(...this.unwrittenToolOutcomes());
    out.push(...this.withheldCalls.slice(this.written.withheld));
    return out;
  }

  private unwrittenToolOutcomes(): PendingOutcome[] {
    return this.toolOutcomes.slice(this.written.tools).map((t) => this.completion(t.record, t.outcome, t.folded));
  }

  /** The model call's record of this turn, if any (route, hashes for the ledger). */
  modelRecord(): CallRecord | undefined {
    return this.records.get(0);
  }

  /** All records of this turn in ordinal order. */
  all(): CallRecord[] {
    return [...this.records.values()].sort((a, b) => a.ordinal - b.ordinal);
  }

  private checkKey(key: JournalKey): void {
    if (key.taskId !== this.scope.token.taskId || key.turn !== this.scope.turn) {
      throw new EverdictError('journal_scope', `journal of task ${this.scope.token.taskId} turn ${this.scope.turn} got a call for another turn`, { details: { field: 'turn' } });
    }
  }

  private kindOf(intent: CallIntent): NewCallIntent['kind'] {
    if (intent.ordinal === 0) return 'model';
    const d = this.scope.registry.descriptor(intent.name);
    // A name the registry does not hold reached nothing but the kernel, which answered it.
    if (d === undefined || d.intrinsic === true) return 'control';
    return d?.access === 'write' ? 'effect' : 'read';
  }

  private intentRow(intent: CallIntent): IntentRow {
    if (intent.ordinal === 0) {
      const last = this.lastRequest;
      const form = last !== null && last.doc === intent.request && last.form !== undefined ? last.form : modelRequestDocument(intent.taskId, intent.request as { route: RouteIdentity; request: ModelRequest }, this.scope.registry);
      return modelIntentRow(intent, this.scope.route, this.scope.versions, form);
    }
    // A long argument (a run the model's response and the conversation also hold) is a span block, stored once per case.
    const request = spannedPaper({ kind: 'artefact', name: `calls/${intent.callId}/request`, schemaId: PAPER_SCHEMAS.toolRequest, bytes: bytesOf(intent.request) });
    return {
      call: {
        id: intent.callId,
        turn: intent.turn,
        ordinal: intent.ordinal,
        kind: this.kindOf(intent),
        toolName: intent.name,
        requestPaperId: request.id,
        requestHash: request.contentHash,
        route: null,
        versions: this.scope.versions,
      },
      request,
    };
  }

  /**
   * An answered model call's cost row, as the provider measured it: a value it did not report
   * (or reported as something other than a non-negative number) stays null — unknown, never 0.
   */
  private costOf(reply: ModelReply): ModelCallCost {
    const measured = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
    return {
      costId: newId(),
      model: typeof reply?.providerModel === 'string' && reply.providerModel !== '' ? reply.providerModel : this.scope.routeModel,
      inputTokens: measured(reply?.usage?.inputTokens),
      outputTokens: measured(reply?.usage?.outputTokens),
      cost: measured(reply?.usage?.cost),
    };
  }

  /** The write of `rec`'s outcome; `unjournalled`: its intent row when the journal does not hold it (inserted settled). */
  private completion(rec: CallRecord, outcome: CallOutcome, unjournalled: IntentRow | null = null): PendingOutcome {
    const isModel = rec.ordinal === 0;
    // Spans (history.ts): the response's long runs are stored once per case, shared with the call's request and the conversation.
    const response = spannedPaper({
      kind: 'artefact',
      name: `calls/${rec.callId}/response/${newId()}`,
      schemaId: isModel ? PAPER_SCHEMAS.modelResponse : PAPER_SCHEMAS.toolResult,
      bytes: bytesOf(outcome.response),
    });
    const r = outcome.response as { outcome?: unknown; error?: { kind?: unknown } } | null;
    const outcomeClass = isModel ? (outcome.status === 'completed' ? 'ok' : String(r?.error?.kind ?? 'failed')) : typeof r?.outcome === 'string' ? r.outcome : null;
    const usage = isModel && outcome.status === 'completed' ? this.costOf(outcome.response as ModelReply) : undefined;
    const done: CallCompletion = { id: rec.callId, status: outcome.status, responsePaperId: response.id, responseHash: response.contentHash, route: isModel ? this.scope.route : null, outcomeClass, ...(usage ? { usage } : {}) };
    return { done, response, unjournalled: unjournalled === null ? null : { call: { ...unjournalled.call, settled: done }, request: unjournalled.request } };
  }

  /**
   * C1: the exact request and the ordinal-0 intent, durable before the model is asked. An intent
   * already in the journal (a resumed turn, or written by the previous turn's commit) is used
   * as it is; an unanswered one whose request differs from the one about to be sent is
   * superseded first, so the journal always holds the bytes the model really got.
   */
  private async recordModelIntent(intent: CallIntent): Promise<CallRecord> {
    const { store, token, caseId } = this.scope;
    const existing = this.records.get(0);
    if (existing?.status === 'completed') return existing;
    let rec: CallRecord;
    if (existing) {
      rec = existing;
      if (existing.requestHash !== intent.requestHash) {
        const row = this.intentRow({ ...intent, callId: existing.callId });
        await store.unitOfWork(async (uow) => {
          await supersedeIntent(uow, token, caseId, existing.callId, row.request, this.scope.route, this.scope.versions);
          await pinNotesToTurn(uow, token, this.scope.turn, this.scope.notesToPin);
        });
        this.scope.onCommit();
        rec = { ...existing, request: intent.request, requestHash: row.request.contentHash };
      } else if (this.scope.notesToPin.length > 0) {
        await store.unitOfWork((uow) => pinNotesToTurn(uow, token, this.scope.turn, this.scope.notesToPin));
        this.scope.onCommit();
      }
    } else {
      const row = this.intentRow(intent);
      const write = { papers: [row.request], completions: [], intents: [row.call], checkpoint: null, ledger: null };
      if (this.scope.notesToPin.length === 0) {
        await this.scope.committer.write(token, caseId, write, null);
      } else {
        await store.unitOfWork(async (uow) => {
          await writeTurn(uow, token, caseId, write);
          await pinNotesToTurn(uow, token, this.scope.turn, this.scope.notesToPin);
        });
      }
      this.scope.onCommit();
      rec = { ...intent, requestHash: row.request.contentHash, status: 'intent', response: null, responseHash: null };
    }
    this.records.set(0, rec);
    this.lastRequest = null; // its bytes are written (or were): nothing more to keep for this turn
    this.scope.crash.reach('after_intent', { taskId: intent.taskId, turn: intent.turn });
    return rec;
  }

  /**
   * C2: the model's response (if not yet durable) and a batch of tool intents, before dispatch —
   * or, when the batch may be folded (durability.ts), no write: its intents are kept here and
   * inserted settled, with their outcomes, by the turn's next write.
   */
  private async flush(): Promise<void> {
    this.flushScheduled = false;
    const batch = this.queue;
    this.queue = [];
    const withResponse = this.modelOutcome !== null && !this.modelOutcome.written;
    const { token, caseId } = this.scope;
    try {
      const rows = batch.map((b) => this.intentRow(b.intent));
      const deferrable = mayDeferIntents(this.scope.registry, batch.map((b) => b.intent.name));
      const unwritten = this.toolOutcomes.slice(this.written.tools);
      const fold = mayFoldIntents(deferrable, unwritten.filter((t) => t.folded === null).length);
      if (fold) {
        rows.forEach((r, i) => this.folded.set(batch[i]!.intent.ordinal, r));
      } else {
        const response = withResponse ? [this.completion(this.modelOutcome!.record, this.modelOutcome!.outcome)] : [];
        // Everything the earlier batches produced is durable before this batch runs. (A write that
        // fails rejects the batch and so fails the turn: nothing else would write what it took.)
        const outcomes = [...response, ...this.unwrittenToolOutcomes(), ...this.withheldCalls.slice(this.written.withheld)];
        const upTo = { tools: this.toolOutcomes.length, withheld: this.withheldCalls.length };
        const cited = unwritten.flatMap((t) => offloadedRefOf(t.outcome.response));
        const results = cited.length === 0 ? [] : this.scope.results.takeResults(token.taskId, cited);
        // A folded intent still open (its call has not answered) is journalled as an intent now.
        const open = [...this.folded.values()];
        const done = outcomeRows(outcomes);
        await this.scope.committer.write(
          token,
          caseId,
          {
            papers: [...done.papers, ...results, ...open.map((r) => r.request), ...rows.map((r) => r.request)],
            completions: done.completions,
            intents: [...done.intents, ...open.map((r) => r.call), ...rows.map((r) => r.call)],
            checkpoint: null,
            ledger: null,
          },
          null,
          // Intents of calls nobody outside this process observes need not wait for the flush (durability.ts).
          { deferDurability: deferrable },
        );
        this.scope.onCommit();
        this.folded.clear();
        if (withResponse) this.modelOutcome!.written = true;
        this.written = upTo;
      }
      batch.forEach((b, i) => {
        const rec: CallRecord = { ...b.intent, requestHash: rows[i]!.request.contentHash, status: 'intent', response: null, responseHash: null };
        this.records.set(b.intent.ordinal, rec);
      });
      if (!fold && withResponse) this.scope.crash.reach('after_response', { taskId: token.taskId, turn: this.scope.turn });
      if (!fold && unwritten.length > 0) this.scope.crash.reach('after_read_batch', { taskId: token.taskId, turn: this.scope.turn });
      batch.forEach((b) => b.resolve(this.records.get(b.intent.ordinal)!));
    } catch (err) {
      for (const b of batch) b.reject(err);
    }
  }
}
