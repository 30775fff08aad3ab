/** Human-readable renderings of API answers: pure, so they are unit-testable. */

/** Left-aligned columns; the header row first. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

export interface CaseSummaryView {
  caseId: string;
  caseType: string;
  state: string;
  customer: string;
  title: string;
  stopMode: string | null;
  createdAt: string;
}

export function casesText(cases: readonly CaseSummaryView[]): string {
  if (cases.length === 0) return 'no cases';
  return table(
    ['CASE', 'TYPE', 'STATE', 'CUSTOMER', 'CREATED', 'TITLE'],
    cases.map((c) => [c.caseId, c.caseType, c.state + (c.stopMode ? ` (stop ${c.stopMode})` : ''), c.customer, c.createdAt, c.title]),
  );
}

interface TaskNodeView {
  id: string;
  profile: string;
  state: string;
  parkReason: string | null;
  children: TaskNodeView[];
}

export interface CaseDetailView extends CaseSummaryView {
  tasks: TaskNodeView[];
  plan: { taskId: string; stepId: string; title: string; status: string }[];
  gates: { id: string; state: string; operation: string; effectClass: string }[];
  openQuestions: { id: string; taskId: string; gap: string; decisionNeeded: string }[];
}

function treeLines(nodes: readonly TaskNodeView[], indent: string): string[] {
  return nodes.flatMap((n) => [`${indent}${n.id}  ${n.profile}  ${n.state}${n.parkReason ? ` (${n.parkReason})` : ''}`, ...treeLines(n.children, `${indent}  `)]);
}

export function caseText(c: CaseDetailView): string {
  const out = [
    `case ${c.caseId}  ${c.state}${c.stopMode ? ` (stop ${c.stopMode})` : ''}`,
    `type ${c.caseType}  customer ${c.customer}  created ${c.createdAt}`,
    `title ${c.title}`,
    '',
    'tasks:',
    ...treeLines(c.tasks, '  '),
  ];
  if (c.plan.length) out.push('', 'plan:', ...c.plan.map((s) => `  [${s.status}] ${s.stepId} ${s.title}`));
  if (c.gates.length) out.push('', 'gates:', ...c.gates.map((g) => `  ${g.id}  ${g.state}  ${g.operation} (${g.effectClass})`));
  if (c.openQuestions.length) out.push('', 'open questions:', ...c.openQuestions.map((q) => `  ${q.id}  ${q.decisionNeeded}: ${q.gap}`));
  return out.join('\n');
}

export interface GateView {
  id: string;
  caseId: string;
  state: string;
  operation: string;
  effectClass: string;
  packetDigest: string;
  summary?: string | null;
  decisions: { decision: string; role: string; canDecide: boolean; verdict: string | null }[];
}

export function gatesText(gates: readonly GateView[]): string {
  if (gates.length === 0) return 'no gates';
  return gates
    .map((g) =>
      [
        `gate ${g.id}  ${g.state}  case ${g.caseId}`,
        `  ${g.operation} (${g.effectClass})${g.summary ? ` — ${g.summary}` : ''}`,
        `  digest ${g.packetDigest}`,
        ...g.decisions.map((d) => `  ${d.decision} (role ${d.role}): ${d.verdict ?? (d.canDecide ? 'yours to decide' : 'pending')}`),
      ].join('\n'),
    )
    .join('\n\n');
}

export interface FleetView {
  tasks: Record<string, number>;
  parked: Record<string, number>;
  outbox: { pending: number; lagSeconds: number };
  queues: { queue: string; messages: number; consumers: number }[];
  /** Absent from an intake older than the fleet stop. */
  stops?: FleetStopView[];
}

export interface FleetStopView {
  kind: string;
  active: boolean;
  reason: string | null;
  changedBy: string | null;
  changedAt: string | null;
}

/** One line per stop kind: in force (by whom, since when, why) or not. */
export function fleetStopsText(stops: readonly FleetStopView[]): string {
  return stops
    .map((s) => (s.active ? `stop ${s.kind}: IN FORCE since ${s.changedAt ?? '?'} by ${s.changedBy ?? '?'}: ${s.reason ?? ''}` : `stop ${s.kind}: off${s.changedAt ? ` (last change ${s.changedAt} by ${s.changedBy ?? '?'})` : ''}`))
    .join('\n');
}

export function fleetText(f: FleetView): string {
  const counts = (r: Record<string, number>) => (Object.keys(r).length ? Object.entries(r).map(([k, v]) => `${k}=${v}`).join(' ') : 'none');
  return [
    `tasks: ${counts(f.tasks)}`,
    `parked: ${counts(f.parked)}`,
    `outbox: ${f.outbox.pending} pending, lag ${f.outbox.lagSeconds}s`,
    ...(f.stops ? [fleetStopsText(f.stops)] : []),
    '',
    f.queues.length ? table(['QUEUE', 'MESSAGES', 'CONSUMERS'], f.queues.map((q) => [q.queue, q.messages < 0 ? 'missing' : String(q.messages), q.consumers < 0 ? '-' : String(q.consumers)])) : 'queues: not reported',
  ].join('\n');
}
