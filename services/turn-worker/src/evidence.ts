/**
 * Evidence with provenance (seed 004 §3, §2.1): what a write proposal may cite, and what the
 * auditor is shown of each citation. The decisions are pure; `resolveEvidence` at the end is
 * the only I/O (journal rows and papers, SQL below).
 *
 * A citation (one string of `writes__propose`'s `evidence`) names one of:
 * - a completed read of the PROPOSING TASK's own journal, by the tool-call id the model knows
 *   (the `callId` of its own tool call, resolved through the task's journalled model responses:
 *   the call at that position of that turn), or by its journal call id (a UUID, also written
 *   `result:<call id>`, the ref a large result is stored under);
 * - a paper the task may read (paperAccess.ts: a permitted paper its parent handed on, by full
 *   name or `result:` ref).
 * Anything else is refused before audit, naming the field (`evidence[2]`): a citation that
 * names no call or paper this task may read, a call that is not a read (a control call, a
 * proposal), a read that did not complete with a result (refused, failed, still open).
 *
 * Provenance comes from WHERE the content came from, never from the content: a connector read's
 * origin (connector, operation, target) is taken from its result document only because the
 * tool is a connector read of the fleet config; an MCP tool's origin is its server and tool as
 * the fleet config declares them. Every tool result is trust `external`. The content hash is
 * recomputed here over what was journalled, and it is what the packet's citation carries, so
 * an approval binds the exact evidence the auditor saw.
 */
import { canonicalJson, connectorReadToolName, parseConnectorRead, payloadHash, sha256Hex } from '@everdict/contracts';
import type { EvidenceCitation, FleetConfig, TrustLabel } from '@everdict/contracts';
import { bridgedToolName } from '@everdict/mcp';
import type { Queryable } from '@everdict/store';

/** At most this many citations per proposal (the packet schema's bound). */
export const MAX_CITATIONS = 8;
/** The auditor is shown at most this many characters of one cited result; the rest is marked truncated. */
export const EVIDENCE_SHOWN_CHARS = 16_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const RESULT_REF = /^result:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** What a citation string names, before anything is looked up. */
export type CitationTarget =
  /** A journal call id; `orPaper` is set for a `result:` ref, which may instead name a permitted paper. */
  | { readonly kind: 'journal'; readonly callId: string; readonly orPaper: string | null }
  /** A tool-call id as the model emitted it. */
  | { readonly kind: 'model'; readonly toolCallId: string }
  /** A paper name (it contains a slash: `results/<task>/result:<id>`, `notebooks/x`). */
  | { readonly kind: 'paper'; readonly ref: string };

export function parseCitation(entry: string): CitationTarget {
  const s = entry.trim();
  const result = RESULT_REF.exec(s);
  if (result) return { kind: 'journal', callId: result[1]!, orPaper: s };
  if (UUID.test(s)) return { kind: 'journal', callId: s, orPaper: null };
  if (s.includes('/')) return { kind: 'paper', ref: s };
  return { kind: 'model', toolCallId: s };
}

/** Where a tool's results come from, from the fleet config (never from the tool's output). */
export type ToolOrigin =
  | { readonly kind: 'connector'; readonly connector: string; readonly operation: string }
  | { readonly kind: 'mcp'; readonly server: string; readonly tool: string; readonly transport: string }
  | { readonly kind: 'tool'; readonly tool: string };

/** Tool name → origin, for every connector read and MCP tool some profile offers. */
export function toolOrigins(config: Pick<FleetConfig, 'profiles' | 'mcpServers'>): Map<string, ToolOrigin> {
  const out = new Map<string, ToolOrigin>();
  for (const p of Object.values(config.profiles)) {
    for (const entry of p?.reads ?? []) {
      const ref = parseConnectorRead(entry);
      if (ref) out.set(connectorReadToolName(ref), { kind: 'connector', connector: ref.connector, operation: ref.operation });
    }
    for (const use of p?.mcp ?? []) {
      const transport = config.mcpServers?.[use.server]?.transport ?? 'unknown';
      for (const tool of Object.keys(use.tools)) out.set(bridgedToolName(use.server, tool), { kind: 'mcp', server: use.server, tool, transport });
    }
  }
  return out;
}

/** A journal row a citation resolved to (any task: the check below refuses another task's). */
export interface CitedCall {
  readonly id: string;
  readonly task_id: string;
  readonly turn: number;
  readonly ordinal: number;
  readonly kind: string;
  readonly tool_name: string | null;
  readonly status: string;
  readonly completed_at: Date | null;
  /** The journalled tool-call record (content, outcome, offloadedRef), parsed. */
  readonly response: { readonly content?: unknown; readonly outcome?: unknown; readonly offloadedRef?: unknown } | null;
}

/** Why `row` may not be cited by `taskId` (null: it may). `field` names the citation. */
export function citedCallProblem(row: CitedCall | undefined, taskId: string, field: string, what: string): string | null {
  if (row === undefined || row.task_id !== taskId) return `${field} (${what}) names no call of this task`;
  if (row.kind !== 'read') return `${field} names call ${row.id} (${row.tool_name ?? row.kind}), which is not a read`;
  if (row.status !== 'completed' || row.response?.outcome !== 'ok') {
    return `${field} names read ${row.id} (${row.tool_name ?? 'unknown'}), which did not complete with a result (${row.status}${typeof row.response?.outcome === 'string' ? `, ${row.response.outcome}` : ''})`;
  }
  return null;
}

/** What the auditor is shown for one citation: where it came from, then (part of) what it said. */
export interface EvidenceItem {
  readonly citation: EvidenceCitation;
  readonly provenance: {
    readonly source: 'journal_call' | 'paper';
    readonly callId?: string;
    readonly tool?: string;
    readonly turn?: number;
    readonly completedAt?: string | null;
    readonly paper?: string;
    readonly origin: Record<string, unknown>;
    readonly trust: TrustLabel;
    readonly dataClass: string;
    /** "sha256:" of the cited content, whole (also when the auditor is shown only a part). */
    readonly contentHash: string;
    /** UTF-8 size of the whole cited content. */
    readonly bytes: number;
    /** True when the content was cut at its source or for the auditor. */
    readonly truncated: boolean;
    readonly observedAt?: string;
  };
  readonly content: unknown;
}

const textHash = (text: string) => `sha256:${sha256Hex(text)}`;

function shown(text: string): { content: string; cut: boolean } {
  return text.length <= EVIDENCE_SHOWN_CHARS ? { content: text, cut: false } : { content: text.slice(0, EVIDENCE_SHOWN_CHARS), cut: true };
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** The evidence of a cited read, from its whole journalled content and the tool's declared origin. */
export function callEvidence(row: CitedCall, whole: string, origin: ToolOrigin | undefined): EvidenceItem {
  const tool = row.tool_name ?? 'unknown';
  const base = { source: 'journal_call' as const, callId: row.id, tool, turn: row.turn, completedAt: row.completed_at?.toISOString() ?? null };
  const doc = origin?.kind === 'connector' ? (parsed(whole) as { origin?: unknown; dataClass?: unknown; truncated?: unknown; observedAt?: unknown; result?: unknown } | undefined) : undefined;
  if (origin?.kind === 'connector' && doc !== undefined && doc !== null && typeof doc === 'object' && 'result' in doc) {
    // Our own connector read's document (connectorReads.ts): origin and data class as the read
    // recorded them, the hash recomputed over the result itself.
    const result = doc.result;
    const canonical = canonicalJson(result ?? null);
    const contentHash = payloadHash(result);
    const cut = shown(canonical);
    return {
      citation: { kind: 'call', ref: row.id, tool, contentHash },
      provenance: {
        ...base,
        origin: { connector: origin.connector, operation: origin.operation, ...(doc.origin && typeof doc.origin === 'object' ? { target: (doc.origin as { target?: unknown }).target ?? null } : {}) },
        trust: 'external',
        dataClass: typeof doc.dataClass === 'string' ? doc.dataClass : 'estate',
        contentHash,
        bytes: Buffer.byteLength(canonical, 'utf8'),
        truncated: doc.truncated === true || cut.cut,
        ...(typeof doc.observedAt === 'string' ? { observedAt: doc.observedAt } : {}),
      },
      content: cut.cut ? cut.content : result,
    };
  }
  const contentHash = textHash(whole);
  const cut = shown(whole);
  const originDoc: Record<string, unknown> =
    origin?.kind === 'mcp' ? { mcpServer: origin.server, tool: origin.tool, transport: origin.transport } : origin?.kind === 'connector' ? { connector: origin.connector, operation: origin.operation } : { tool };
  return {
    citation: { kind: 'call', ref: row.id, tool, contentHash },
    provenance: { ...base, origin: originDoc, trust: 'external', dataClass: origin?.kind === 'mcp' ? 'mcp_result' : 'tool_result', contentHash, bytes: Buffer.byteLength(whole, 'utf8'), truncated: cut.cut },
    content: cut.content,
  };
}

/** The evidence of a cited paper the task may read. Stored results are tool output: `external`. */
export function paperEvidence(name: string, bytes: Buffer): EvidenceItem {
  const whole = bytes.toString('utf8');
  const contentHash = textHash(whole);
  const cut = shown(whole);
  return {
    citation: { kind: 'paper', ref: name, contentHash },
    provenance: { source: 'paper', paper: name, origin: { paper: name }, trust: name.startsWith('results/') ? 'external' : 'agent', dataClass: 'paper', contentHash, bytes: bytes.length, truncated: cut.cut },
    content: cut.content,
  };
}

// ------------------------------------------------------------------------------- I/O

const CALL_COLUMNS = `c.id, c.task_id, c.turn, c.ordinal, c.kind, c.tool_name, c.status, c.completed_at, CASE WHEN rs.layout IS NULL THEN rs.bytes ELSE paper_document(rs.paper_id, rs.revision) END AS response_bytes`;
const RESPONSE_JOIN = `LEFT JOIN papers ps ON ps.id = c.response_paper_id
             LEFT JOIN paper_revisions rs ON rs.paper_id = ps.id AND rs.revision = ps.head_revision`;

type CallRow = Omit<CitedCall, 'response'> & { readonly response_bytes: Buffer | null };

/** A call of `taskId` by journal id. */
const selectCallById = (taskId: string, callId: string) => ({
  name: 'tw_evidence_call_by_id',
  text: `SELECT ${CALL_COLUMNS}
             FROM runtime_calls c
             ${RESPONSE_JOIN}
            WHERE c.id = $1::uuid AND c.task_id = $2::uuid`,
  values: [callId, taskId],
});

/**
 * A call of `taskId` by the tool-call id its model emitted: the model response of a turn lists
 * its tool calls in order, and the kernel journals the i-th one at ordinal i + 1 of that turn.
 * A model may reuse ids across turns: the newest turn that emitted the id wins.
 */
const selectCallByToolCallId = (taskId: string, toolCallId: string) => ({
  name: 'tw_evidence_call_by_tool_call_id',
  text: `WITH hit AS (
               SELECT m.turn, t.ord::int AS ordinal, t.call ->> 'name' AS name
                 FROM runtime_calls m
                 JOIN papers mp ON mp.id = m.response_paper_id
                 JOIN paper_revisions mr ON mr.paper_id = mp.id AND mr.revision = mp.head_revision
                 CROSS JOIN LATERAL (SELECT convert_from(CASE WHEN mr.layout IS NULL THEN mr.bytes ELSE paper_document(mr.paper_id, mr.revision) END, 'UTF8')::jsonb AS doc) md
                 CROSS JOIN LATERAL jsonb_array_elements(
                   CASE WHEN jsonb_typeof(md.doc -> 'output' -> 'toolCalls') = 'array'
                        THEN md.doc -> 'output' -> 'toolCalls' ELSE '[]'::jsonb END
                 ) WITH ORDINALITY AS t(call, ord)
                WHERE m.task_id = $1::uuid AND m.ordinal = 0 AND m.status = 'completed' AND t.call ->> 'callId' = $2::text
                ORDER BY m.turn DESC
                LIMIT 1)
           SELECT ${CALL_COLUMNS}
             FROM hit
             JOIN runtime_calls c ON c.task_id = $1::uuid AND c.turn = hit.turn AND c.ordinal = hit.ordinal AND c.tool_name = hit.name
             ${RESPONSE_JOIN}`,
  values: [taskId, toolCallId],
});

/** The whole stored result a journalled (offloaded) call refers to. */
const selectResultPaper = (caseId: string, name: string) => ({
  name: 'tw_evidence_result_paper',
  text: `SELECT r.bytes FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
          WHERE p.case_id = $1::uuid AND p.name = $2::text`,
  values: [caseId, name],
});

function toCited(r: CallRow | undefined): CitedCall | undefined {
  if (r === undefined) return undefined;
  const { response_bytes, ...rest } = r;
  const response = response_bytes === null ? null : (parsed(response_bytes.toString('utf8')) as CitedCall['response']);
  return { ...rest, response: response ?? null };
}

export interface EvidenceContext {
  readonly db: Queryable;
  readonly caseId: string;
  readonly taskId: string;
  readonly origins: ReadonlyMap<string, ToolOrigin>;
  /** Reads a paper the task's context permits (paperAccess.readPermittedPaper; records a refusal). */
  readonly readPaper: (ref: string) => Promise<{ readonly kind: 'read'; readonly name: string; readonly bytes: Buffer } | { readonly kind: 'refused' | 'unknown' }>;
}

type Resolved = { readonly ok: true; readonly items: readonly EvidenceItem[] } | { readonly ok: false; readonly problems: readonly string[] };

/** Resolves every citation or says, per field, why it cannot be cited. */
export async function resolveEvidence(ctx: EvidenceContext, entries: readonly string[]): Promise<Resolved> {
  const items: EvidenceItem[] = [];
  const problems: string[] = [];
  if (entries.length > MAX_CITATIONS) return { ok: false, problems: [`evidence cites ${entries.length} results; at most ${MAX_CITATIONS}`] };
  for (const [i, entry] of entries.entries()) {
    const field = `evidence[${i}]`;
    const target = parseCitation(entry);
    const what = JSON.stringify(entry.slice(0, 80));
    if (target.kind === 'paper') {
      const paper = await ctx.readPaper(target.ref);
      if (paper.kind === 'read') items.push(paperEvidence(paper.name, paper.bytes));
      else problems.push(`${field} (${what}) names no paper this task may read`);
      continue;
    }
    const sql = target.kind === 'journal' ? selectCallById(ctx.taskId, target.callId) : selectCallByToolCallId(ctx.taskId, target.toolCallId);
    const row = toCited((await ctx.db.query<CallRow>(sql)).rows[0]);
    if (row === undefined && target.kind === 'journal' && target.orPaper !== null) {
      const paper = await ctx.readPaper(target.orPaper);
      if (paper.kind === 'read') {
        items.push(paperEvidence(paper.name, paper.bytes));
        continue;
      }
    }
    const problem = citedCallProblem(row, ctx.taskId, field, what);
    if (problem !== null || row === undefined) {
      problems.push(problem ?? `${field} names no call of this task`);
      continue;
    }
    let whole = typeof row.response?.content === 'string' ? row.response.content : '';
    const ref = row.response?.offloadedRef;
    if (typeof ref === 'string') {
      const stored = (await ctx.db.query<{ bytes: Buffer }>(selectResultPaper(ctx.caseId, `results/${ctx.taskId}/${ref}`))).rows[0];
      if (stored === undefined) {
        problems.push(`${field} names read ${row.id}, whose stored result is not readable yet`);
        continue;
      }
      whole = stored.bytes.toString('utf8');
    }
    items.push(callEvidence(row, whole, row.tool_name === null ? undefined : ctx.origins.get(row.tool_name)));
  }
  // One result cited twice is one piece of evidence.
  const seen = new Set<string>();
  const unique = items.filter((it) => (seen.has(`${it.citation.kind}:${it.citation.ref}`) ? false : (seen.add(`${it.citation.kind}:${it.citation.ref}`), true)));
  return problems.length === 0 ? { ok: true, items: unique } : { ok: false, problems };
}
