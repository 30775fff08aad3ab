/**
 * Compaction (seed 004 §6): when a run's context outgrows its share of the route's context
 * window (measured in bytes of the canonical messages, estimated at BYTES_PER_TOKEN a token — the
 * same bytes the request carries), the earlier messages are replaced by ONE derived summary paper — facts with their sources (content hashes), the
 * decisions the run has taken in (by id), and its pending work (open todos, running children,
 * an armed wait, the plan, calls with unknown outcome). The summary is checked before it is
 * used: if it lost any pending item or decision reference, the previous summary (i.e. the
 * messages as they are) is kept. It never edits plans, grants, receipts or evidence — it only
 * adds a new paper. Pure functions; the paper is written by the turn's commit.
 */
import { canonicalJson, payloadHash } from '@everdict/contracts';
import type { ChatMessage } from '@everdict/llm';
import type { RunState } from '@everdict/agent-runtime';
import type { FleetCompaction, FleetRoute } from '@everdict/contracts';
import { messageItems, messagesWeight } from './canonical.js';
import type { HistoryItem } from '@everdict/store';
import type { HostState } from './statePaper.js';

/** A route's context window when its config does not say (fleet config `contextWindowTokens`). */
export const DEFAULT_CONTEXT_WINDOW_TOKENS = 128_000;
/** The share of the window a context may fill before it is compacted (`windowShare`). */
export const DEFAULT_WINDOW_SHARE = 0.75;
/** The estimate of tokens from canonical JSON bytes (conservative for English and JSON). */
export const BYTES_PER_TOKEN = 4;

/** What compaction measures a run against: the profile's settings and its route's window. */
export interface CompactionLimit {
  readonly maxMessages?: number;
  readonly keepRecent?: number;
  /** The context may fill this many tokens (windowShare × contextWindowTokens). */
  readonly maxContextTokens: number;
}

/** The limit of a profile on its route (defaults: a 128k window, 0.75 of it). */
export function compactionLimit(profile: FleetCompaction | undefined, route: Pick<FleetRoute, 'contextWindowTokens'> | undefined): CompactionLimit {
  const window = route?.contextWindowTokens ?? DEFAULT_CONTEXT_WINDOW_TOKENS;
  return {
    ...(profile?.maxMessages === undefined ? {} : { maxMessages: profile.maxMessages }),
    ...(profile?.keepRecent === undefined ? {} : { keepRecent: profile.keepRecent }),
    maxContextTokens: Math.floor(window * (profile?.windowShare ?? DEFAULT_WINDOW_SHARE)),
  };
}

/** A message's estimated tokens (its canonical bytes). One function, so the chain keeps its sum. */
const tokensOf = (it: HistoryItem): number => Math.ceil(it.bytes.length / BYTES_PER_TOKEN);

/** Estimated tokens of each message (its canonical bytes, cached per message). */
function messageTokens(run: RunState): number[] {
  return messageItems(run.taskId, run.messages).map(tokensOf);
}

/**
 * The run's context size in estimated tokens (its messages as the request carries them): the sum
 * is kept with the conversation's chain, so a turn adds only its new messages' tokens.
 */
export function contextTokens(run: RunState): number {
  return messagesWeight(run.taskId, run.messages, tokensOf);
}

export const SUMMARY_SCHEMA = 'everdict/summary.v1';

interface SummaryFact {
  readonly index: number;
  readonly role: ChatMessage['role'];
  readonly tool: string | null;
  readonly callId: string | null;
  readonly contentHash: string;
  readonly excerpt: string;
}

interface SummaryDocument {
  readonly schema: typeof SUMMARY_SCHEMA;
  readonly taskId: string;
  readonly throughTurn: number;
  readonly objective: string;
  readonly facts: readonly SummaryFact[];
  readonly decisions: HostState['decisions'];
  readonly pending: {
    readonly todos: RunState['todos'];
    readonly children: RunState['children'];
    readonly wait: RunState['wait'];
    readonly plan: RunState['plan'];
    readonly calls: readonly string[];
  };
  readonly previous: HostState['summary'];
}

const EXCERPT = 200;

/** Where to cut: keep the last `keepRecent` messages, never starting on a tool result. */
export function cutIndex(messages: readonly ChatMessage[], keepRecent: number): number {
  let cut = Math.max(0, messages.length - keepRecent);
  while (cut > 0 && messages[cut]?.role === 'tool') cut--;
  return cut;
}

export function buildSummary(run: RunState, host: HostState, dropped: readonly ChatMessage[]): SummaryDocument {
  const facts = dropped.map((m, index): SummaryFact => {
    const content = m.role === 'assistant' ? (m.content ?? '') + (m.toolCalls.length ? ` [calls: ${m.toolCalls.map((c) => c.name).join(', ')}]` : '') : m.content;
    return {
      index,
      role: m.role,
      tool: m.role === 'tool' ? m.name : null,
      callId: m.role === 'tool' ? m.callId : null,
      contentHash: payloadHash(content),
      excerpt: content.slice(0, EXCERPT),
    };
  });
  return {
    schema: SUMMARY_SCHEMA,
    taskId: run.taskId,
    throughTurn: run.turn,
    objective: run.objective,
    facts,
    decisions: host.decisions,
    pending: {
      todos: run.todos.filter((t) => t.status !== 'done'),
      children: run.children.filter((c) => c.status === 'running'),
      wait: run.wait,
      plan: run.plan,
      calls: host.pending.calls,
    },
    previous: host.summary,
  };
}

/** What the summary failed to keep (empty = it kept every pending item and decision reference). */
export function summaryMisses(summary: SummaryDocument, run: RunState, host: HostState): string[] {
  const missing: string[] = [];
  const todoIds = new Set(summary.pending.todos.map((t) => t.id));
  for (const t of run.todos) if (t.status !== 'done' && !todoIds.has(t.id)) missing.push(`todo:${t.id}`);
  const childIds = new Set(summary.pending.children.map((c) => c.childTaskId));
  for (const c of run.children) if (c.status === 'running' && !childIds.has(c.childTaskId)) missing.push(`child:${c.childTaskId}`);
  const refs = new Set(summary.decisions.map((d) => `${d.kind}:${d.ref}`));
  for (const d of host.decisions) if (!refs.has(`${d.kind}:${d.ref}`)) missing.push(`decision:${d.kind}:${d.ref}`);
  const calls = new Set(summary.pending.calls);
  for (const c of host.pending.calls) if (!calls.has(c)) missing.push(`call:${c}`);
  if (run.wait !== null && summary.pending.wait === null) missing.push('wait');
  if (run.plan !== null && summary.pending.plan?.revision !== run.plan.revision) missing.push('plan');
  return missing;
}

export function summaryBytes(summary: SummaryDocument): Buffer {
  return Buffer.from(canonicalJson(summary), 'utf8');
}

/** The message that stands in for the dropped ones, naming the paper it summarises into. */
export function summaryMessage(summary: SummaryDocument, paper: { paperId: string; revision: number }): ChatMessage {
  const body = { decisions: summary.decisions, pending: summary.pending, facts: summary.facts.map((f) => ({ role: f.role, tool: f.tool, excerpt: f.excerpt, contentHash: f.contentHash })) };
  return { role: 'user', content: `Summary of earlier work (paper ${paper.paperId} revision ${paper.revision}; the full record stays in the case):\n${canonicalJson(body)}` };
}

/** Whether the run's context outgrew its limit (its size; or more messages than `maxMessages`, if set). */
export function needsCompaction(run: RunState, limit: CompactionLimit): boolean {
  if (limit.maxMessages !== undefined && run.messages.length > limit.maxMessages) return true;
  return contextTokens(run) > limit.maxContextTokens;
}

/**
 * Where to cut a run under `limit`: `keepRecent` messages if set, else the most recent messages
 * that fit in half the context limit (at least two), never starting on a tool result.
 */
export function compactionCut(run: RunState, limit: CompactionLimit): number {
  if (limit.keepRecent !== undefined) return cutIndex(run.messages, limit.keepRecent);
  if (limit.maxMessages !== undefined && run.messages.length > limit.maxMessages && contextTokens(run) <= limit.maxContextTokens) {
    return cutIndex(run.messages, Math.max(2, Math.floor(limit.maxMessages / 2)));
  }
  const tokens = messageTokens(run);
  const budget = Math.floor(limit.maxContextTokens / 2);
  let kept = 0;
  let used = 0;
  for (let i = tokens.length - 1; i >= 0; i--) {
    if (kept >= 2 && used + tokens[i]! > budget) break;
    used += tokens[i]!;
    kept++;
  }
  return cutIndex(run.messages, kept);
}
