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
  /** A parked case's reason class (question, gate, budget, …, or unreconciled). */
  parkedReason?: string | null;
  /** When the case entered its state. */
  stateSince?: string;
  customer: string;
  title: string;
  stopMode: string | null;
  createdAt: string;
}

/** How long ago `since` was, relative to `now`, as 42s / 5m / 3h / 2d. */
export function ageText(since: string, now: Date): string {
  const s = Math.max(0, Math.floor((now.getTime() - Date.parse(since)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172_800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

/** The STATE column: a parked case shows its reason class, every case its age in the state. */
function stateText(c: CaseSummaryView, now: Date): string {
  const reason = c.state === 'parked' && c.parkedReason ? `:${c.parkedReason}` : '';
  const age = c.stateSince ? ` ${ageText(c.stateSince, now)}` : '';
  return `${c.state}${reason}${age}${c.stopMode ? ` (stop ${c.stopMode})` : ''}`;
}

export function casesText(cases: readonly CaseSummaryView[], now: Date = new Date()): string {
  if (cases.length === 0) return 'no cases';
  return table(
    ['CASE', 'TYPE', 'STATE', 'CUSTOMER', 'CREATED', 'TITLE'],
    cases.map((c) => [c.caseId, c.caseType, stateText(c, now), c.customer, c.createdAt, c.title]),
  );
}

/** Model usage and minutes; `null` = unknown (a provider did not report it), never shown as 0. */
export interface CostsView {
  modelCalls: number;
  inputTokens: number | null;
  outputTokens: number | null;
  cost: number | null;
  activeMinutes: number;
  waitingMinutes: number;
}

interface TaskNodeView {
  id: string;
  profile: string;
  state: string;
  parkReason: string | null;
  /** Absent from an intake older than costs. */
  costs?: CostsView;
  children: TaskNodeView[];
}

const unknownOr = (v: number | null) => (v === null ? 'unknown' : String(v));
const minutes = (m: number) => (Math.round(m * 100) / 100).toFixed(2);

/** `calls 3  tokens in 120 out 45  cost unknown  active 0.12m  waiting 1.50m` */
export function costsLine(c: CostsView): string {
  return `calls ${c.modelCalls}  tokens in ${unknownOr(c.inputTokens)} out ${unknownOr(c.outputTokens)}  cost ${unknownOr(c.cost)}  active ${minutes(c.activeMinutes)}m  waiting ${minutes(c.waitingMinutes)}m`;
}

export interface CaseDetailView extends CaseSummaryView {
  tasks: TaskNodeView[];
  /** The case total (every task, children included); absent from an intake older than costs. */
  costs?: CostsView;
  plan: { taskId: string; stepId: string; title: string; status: string }[];
  gates: { id: string; state: string; operation: string; effectClass: string; deadlineAt?: string | null; escalations?: number }[];
  openQuestions: { id: string; taskId: string; gap: string; decisionNeeded: string; deadlineAt?: string | null; escalations?: number }[];
  /** Per task: plan revisions and the current projection; absent from an intake older than item 9. */
  plans?: PlanView[];
  /** Parked tasks an expired deadline handed to an operator. */
  awaitingOperator?: { taskId: string; reason: string; since: string }[];
  /** The case's session; absent from an intake older than sessions. */
  session?: { state: string; controller: string | null; since: string };
}

export interface PlanView {
  taskId: string;
  parentTaskId: string | null;
  root: boolean;
  latestRevision: number;
  confirmedRevision: number | null;
  revisions: { revision: number; steps: { stepId: string; title: string }[]; submittedAt: string; confirmation: { by: string | null; at: string } | null }[];
  current: { stepId: string; title: string; status: string }[];
}

function planLines(p: PlanView): string[] {
  const who = p.root ? 'root' : `child of ${p.parentTaskId ?? '?'}`;
  return [
    `  ${p.taskId} (${who})  revision ${p.latestRevision}  confirmed ${p.confirmedRevision ?? 'none'}`,
    ...p.revisions.map((r) => `    r${r.revision} ${r.submittedAt}  ${r.confirmation ? `confirmed ${r.confirmation.at}` : 'unconfirmed'}  ${r.steps.map((s) => s.stepId).join(', ')}`),
    ...p.current.map((s) => `    [${s.status}] ${s.stepId} ${s.title}`),
  ];
}

/** ` deadline <iso> (escalated 1×)` or nothing when no deadline is set. */
function deadlineText(d: { deadlineAt?: string | null; escalations?: number }): string {
  if (!d.deadlineAt) return '';
  return `  deadline ${d.deadlineAt}${d.escalations ? ` (escalated ${d.escalations}×)` : ''}`;
}

function treeLines(nodes: readonly TaskNodeView[], indent: string): string[] {
  return nodes.flatMap((n) => [
    `${indent}${n.id}  ${n.profile}  ${n.state}${n.parkReason ? ` (${n.parkReason})` : ''}`,
    ...(n.costs ? [`${indent}  ${costsLine(n.costs)}`] : []),
    ...treeLines(n.children, `${indent}  `),
  ]);
}

export function caseText(c: CaseDetailView): string {
  const out = [
    `case ${c.caseId}  ${c.state}${c.stopMode ? ` (stop ${c.stopMode})` : ''}`,
    `type ${c.caseType}  customer ${c.customer}  created ${c.createdAt}`,
    `title ${c.title}`,
    ...(c.session ? [`session ${c.session.state}  controller ${c.session.controller ?? '(none yet)'}  since ${c.session.since}`] : []),
    '',
    'tasks:',
    ...treeLines(c.tasks, '  '),
  ];
  if (c.costs) out.push('', `total: ${costsLine(c.costs)}`);
  if (c.plans) {
    if (c.plans.length) out.push('', 'plans:', ...c.plans.flatMap(planLines));
  } else if (c.plan.length) out.push('', 'plan:', ...c.plan.map((s) => `  [${s.status}] ${s.stepId} ${s.title}`));
  if (c.gates.length) out.push('', 'gates:', ...c.gates.map((g) => `  ${g.id}  ${g.state}  ${g.operation} (${g.effectClass})${deadlineText(g)}`));
  if (c.openQuestions.length) out.push('', 'open questions:', ...c.openQuestions.map((q) => `  ${q.id}  ${q.decisionNeeded}: ${q.gap}${deadlineText(q)}`));
  if (c.awaitingOperator?.length) out.push('', 'awaiting an operator:', ...c.awaitingOperator.map((a) => `  ${a.taskId}  since ${a.since}: ${a.reason}`));
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

export interface VerifyView {
  caseId: string;
  ok: boolean;
  records: number;
  problem?: { seq: number; reason: string };
  head: { seq: number; hash: string } | null;
  lastRecord: { seq: number; hash: string } | null;
}

/** The verdict and the head: keep the head line to detect a later truncated tail. */
export function verifyText(v: VerifyView): string {
  return [
    `ledger of case ${v.caseId}: ${v.ok ? 'chain verified' : `BROKEN at seq ${v.problem?.seq ?? '?'} (${v.problem?.reason ?? 'unknown'})`}, ${v.records} record(s)`,
    `head ${v.head ? `seq ${v.head.seq} ${v.head.hash}` : 'none (no record)'}`,
    ...(v.ok || v.lastRecord === null ? [] : [`last record read: seq ${v.lastRecord.seq} ${v.lastRecord.hash}`]),
  ].join('\n');
}

export interface LedgerEntryView {
  seq: number;
  kind: string;
  createdAt: string;
  hash: string;
  body: unknown;
}

/** One record a line: seq, time, kind, hash, then the body as compact JSON. */
export function ledgerEntryLine(e: LedgerEntryView): string {
  return `${e.seq}  ${e.createdAt}  ${e.kind}  ${e.hash}  ${JSON.stringify(e.body)}`;
}
