/** What the API answers: pure projections of store rows (no I/O, no secrets, ISO timestamps). */
import type { CaseDetail, CaseRow, CaseTaskRow, LedgerRow } from '@everdict/store';

interface TaskNode {
  readonly id: string;
  readonly profile: string;
  readonly state: string;
  readonly parkReason: string | null;
  readonly budget: { readonly limitMinutes: number | null; readonly usedMinutes: number };
  readonly createdAt: string;
  readonly children: TaskNode[];
}

/** The task tree: roots first, children in creation order. An orphan (unknown parent) is a root. */
export function taskTree(rows: readonly CaseTaskRow[]): TaskNode[] {
  const nodes = new Map<string, TaskNode>();
  for (const r of rows) {
    nodes.set(r.id, {
      id: r.id,
      profile: r.profile,
      state: r.state,
      parkReason: r.park_reason,
      budget: { limitMinutes: r.budget_limit_minutes === null ? null : Number(r.budget_limit_minutes), usedMinutes: Number(r.budget_used_minutes) },
      createdAt: r.created_at.toISOString(),
      children: [],
    });
  }
  const roots: TaskNode[] = [];
  for (const r of rows) {
    const node = nodes.get(r.id)!;
    const parent = r.parent_id === null ? undefined : nodes.get(r.parent_id);
    (parent ? parent.children : roots).push(node);
  }
  return roots;
}

function caseSummary(c: CaseRow) {
  return {
    caseId: c.id,
    caseType: c.case_type,
    state: c.state,
    customer: c.customer,
    title: c.title,
    stopMode: c.stop_mode,
    createdAt: c.created_at.toISOString(),
    updatedAt: c.updated_at.toISOString(),
  };
}

export function caseView(c: CaseRow, d: CaseDetail) {
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
  }));
  return {
    ...caseSummary(c),
    objective: c.objective,
    tasks: taskTree(d.tasks),
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
    })),
    openQuestions: questions.filter((q) => q.open),
    questions,
  };
}

/** A page of cases; `next` (absent on the last page) is the `before` of the following page. */
export function listView(rows: readonly CaseRow[], limit: number) {
  const last = rows.at(-1);
  return { cases: rows.map(caseSummary), next: rows.length === limit && last ? last.id : null };
}

/** A page of the ledger; `next` (absent on the last page) is the `after` of the following page. */
export function ledgerView(caseId: string, rows: readonly LedgerRow[], limit: number) {
  return {
    caseId,
    entries: rows.map((r) => ({ seq: r.seq, recordId: r.record_id, kind: r.kind, body: r.body, prevHash: r.prev_hash, hash: r.hash, createdAt: r.created_at.toISOString() })),
    next: rows.length === limit ? (rows.at(-1)?.seq ?? null) : null,
  };
}
