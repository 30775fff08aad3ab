/** What the API answers: pure projections of store rows (no I/O, no secrets, ISO timestamps). */
import { addCosts, taskCost, ZERO_COST } from '@everdict/store';
import { awaitingOperator, deadlineOf, plansView } from './plansView.js';
import type { CaseDetail, CasePaperRow, CaseRow, CaseTaskRow, CostTotals, GateRolesRow, LedgerRow, TaskCostRow } from '@everdict/store';
import { CASE_STATES, isOneOf } from '@everdict/contracts';
import type { CaseState } from '@everdict/contracts';

/** The `state` filter of the case list: null (no filter), a case state, or undefined (not one). */
export function caseStateFilter(raw: string | null): CaseState | null | undefined {
  if (raw === null || raw === '') return null;
  return isOneOf(CASE_STATES, raw) ? raw : undefined;
}

interface TaskNode {
  readonly id: string;
  readonly profile: string;
  readonly state: string;
  readonly parkReason: string | null;
  readonly budget: { readonly limitMinutes: number | null; readonly usedMinutes: number };
  readonly createdAt: string;
  /** This task's own model usage and minutes (`null` values: unknown, some call did not report it). */
  costs: CostTotals;
  /** This task and every descendant: what the subtree cost. */
  costsWithChildren: CostTotals;
  readonly children: TaskNode[];
}

/** The task tree: roots first, children in creation order. An orphan (unknown parent) is a root. */
export function taskTree(rows: readonly CaseTaskRow[], costs: readonly TaskCostRow[] = []): TaskNode[] {
  const own = new Map(costs.map((c) => [c.task_id, taskCost(c)]));
  const nodes = new Map<string, TaskNode>();
  for (const r of rows) {
    nodes.set(r.id, {
      id: r.id,
      profile: r.profile,
      state: r.state,
      parkReason: r.park_reason,
      budget: { limitMinutes: r.budget_limit_minutes === null ? null : Number(r.budget_limit_minutes), usedMinutes: Number(r.budget_used_minutes) },
      createdAt: r.created_at.toISOString(),
      costs: own.get(r.id) ?? ZERO_COST,
      costsWithChildren: ZERO_COST,
      children: [],
    });
  }
  const roots: TaskNode[] = [];
  for (const r of rows) {
    const node = nodes.get(r.id)!;
    const parent = r.parent_id === null ? undefined : nodes.get(r.parent_id);
    (parent ? parent.children : roots).push(node);
  }
  const total = (n: TaskNode): CostTotals => (n.costsWithChildren = n.children.reduce((sum, c) => addCosts(sum, total(c)), n.costs));
  roots.forEach(total);
  return roots;
}

function caseSummary(c: CaseRow) {
  return {
    caseId: c.id,
    caseType: c.case_type,
    state: c.state,
    // A parked case names its reason class; `stateSince` is when it entered its state (its age).
    ...(c.state === 'parked' ? { parkedReason: c.state_reason } : {}),
    stateSince: c.state_since.toISOString(),
    customer: c.customer,
    title: c.title,
    stopMode: c.stop_mode,
    createdAt: c.created_at.toISOString(),
    updatedAt: c.updated_at.toISOString(),
  };
}

/** What the console reads besides the case detail: papers with provenance, gates' roles. */
export interface CaseConsoleDetail {
  readonly papers: readonly CasePaperRow[];
  readonly gateRoles: readonly GateRolesRow[];
}

/** A paper as the console shows it: head revision and provenance, never its bytes. */
export function paperView(p: CasePaperRow) {
  return {
    id: p.id,
    kind: p.kind,
    name: p.name,
    revision: p.head_revision,
    schemaId: p.schema_id,
    contentHash: p.content_hash,
    sizeBytes: p.size_bytes,
    createdAt: p.created_at.toISOString(),
    revisedAt: p.revised_at?.toISOString() ?? null,
    provenance: { calls: p.calls, gates: p.gate_ids },
  };
}

export function caseView(c: CaseRow, d: CaseDetail, extra: CaseConsoleDetail = { papers: [], gateRoles: [] }) {
  const roles = new Map(extra.gateRoles.map((g) => [g.id, g]));
  const questions = d.questions.map((q) => ({
    id: q.id,
    taskId: q.task_id,
    gap: q.gap,
    decisionNeeded: q.decision_needed,
    alternatives: q.alternatives,
    open: q.answer === null,
    answeredBy: q.answered_by,
    createdAt: q.created_at.toISOString(),
    answeredAt: q.answered_at?.toISOString() ?? null,
    ...deadlineOf(d.deadlines, 'question', q.id),
  }));
  const tasks = taskTree(d.tasks, d.costs);
  return {
    ...caseSummary(c),
    objective: c.objective,
    tasks,
    /** The case total: every task of the case, children included. */
    costs: tasks.reduce((sum, t) => addCosts(sum, t.costsWithChildren), ZERO_COST),
    plan: d.planSteps.map((s) => ({ taskId: s.task_id, stepId: s.step_id, revision: s.revision, title: s.title, dependsOn: s.depends_on, status: s.status })),
    gates: d.gates.map((g) => ({
      id: g.id,
      taskId: g.task_id,
      state: g.state,
      operation: g.operation,
      effectClass: g.effect_class,
      packetDigest: g.packet_digest,
      createdAt: g.created_at.toISOString(),
      decidedAt: g.decided_at?.toISOString() ?? null,
      expiresAt: roles.get(g.id)?.expires_at?.toISOString() ?? null,
      /** Each required decision with the role that may give it, and the decisions recorded so far. */
      requiredDecisions: roles.get(g.id)?.required_decisions ?? [],
      roles: [...new Set((roles.get(g.id)?.required_decisions ?? []).map((r) => r.role))],
      decisions: roles.get(g.id)?.decisions ?? [],
      ...deadlineOf(d.deadlines, 'gate', g.id),
    })),
    /** Per task: every plan revision with its confirmation, and the current projection. */
    plans: plansView(d.tasks, d.planRevisions, d.planSteps),
    awaitingOperator: awaitingOperator(d.deadlines),
    openQuestions: questions.filter((q) => q.open),
    questions,
    papers: extra.papers.map(paperView),
  };
}

/** A page of cases; `next` (absent on the last page) is the `before` of the following page. */
export function listView(rows: readonly CaseRow[], limit: number) {
  const last = rows.at(-1);
  return { cases: rows.map(caseSummary), next: rows.length === limit && last ? last.id : null };
}

/** A page of the ledger; `next` (absent on the last page) is the `after` of the following page. */
/** One ledger record as the API shows it (the page and the live stream alike). */
export function ledgerEntryView(r: LedgerRow) {
  return { seq: r.seq, recordId: r.record_id, kind: r.kind, body: r.body, prevHash: r.prev_hash, hash: r.hash, createdAt: r.created_at.toISOString() };
}

export function ledgerView(caseId: string, rows: readonly LedgerRow[], limit: number) {
  return {
    caseId,
    entries: rows.map(ledgerEntryView),
    next: rows.length === limit ? (rows.at(-1)?.seq ?? null) : null,
  };
}
