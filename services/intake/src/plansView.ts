/**
 * Pure projections of a case's plans and deadlines for the case view (issue 13 items 6 and 9).
 * Per task: every immutable revision with its confirmation (a child's is confirmed by its parent
 * on receipt; a root's revision is recorded and shown here, not confirmed), and the current
 * projection — the steps of the last confirmed revision with the status the platform derived
 * (`done` only after the step's assertion passed, never because the model said so).
 */
import type { CaseDeadlines, CasePlanRevisionRow, CaseTaskRow, PlanStepRow } from '@everdict/store';

interface PlanStepInput {
  readonly stepId: string;
  readonly title: string;
  readonly dependsOn: readonly string[];
}

export function plansView(tasks: readonly CaseTaskRow[], revisions: readonly CasePlanRevisionRow[], steps: readonly PlanStepRow[]) {
  const rootIds = new Set(tasks.filter((t) => t.parent_id === null).map((t) => t.id));
  const byTask = new Map<string, CasePlanRevisionRow[]>();
  for (const r of revisions) byTask.set(r.task_id, [...(byTask.get(r.task_id) ?? []), r]);
  return [...byTask.entries()].map(([taskId, revs]) => {
    const current = steps.filter((s) => s.task_id === taskId);
    const confirmed = revs.filter((r) => r.confirmed_at !== null).at(-1);
    return {
      taskId,
      parentTaskId: revs[0]!.parent_id,
      root: rootIds.has(taskId),
      latestRevision: revs.at(-1)!.revision,
      confirmedRevision: confirmed?.revision ?? null,
      revisions: revs.map((r) => ({
        revision: r.revision,
        planHash: r.plan_hash,
        steps: (r.steps as PlanStepInput[]).map((s) => ({ stepId: s.stepId, title: s.title, dependsOn: s.dependsOn })),
        submittedAt: r.created_at.toISOString(),
        confirmation: r.confirmed_at === null ? null : { by: r.confirmed_by, at: r.confirmed_at.toISOString() },
      })),
      current: current.map((s) => ({ stepId: s.step_id, revision: s.revision, title: s.title, dependsOn: s.depends_on, status: s.status })),
    };
  });
}

/** Deadline fields of one gate or question (null: its case type declares no escalation for it). */
export function deadlineOf(d: CaseDeadlines, subject: 'gate' | 'question', id: string) {
  const row = d.items.find((i) => i.subject === subject && i.id === id);
  return {
    deadlineAt: row?.deadline_at?.toISOString() ?? null,
    escalations: row?.escalations ?? 0,
    escalatedAt: row?.escalated_at?.toISOString() ?? null,
  };
}

/** Parked tasks an expired deadline handed to an operator, with the reason and since when. */
export function awaitingOperator(d: CaseDeadlines) {
  return d.operatorParks.map((p) => ({ taskId: p.task_id, reason: p.reason, since: p.since }));
}
