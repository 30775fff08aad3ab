/**
 * One case: the agent graph, plans, questions, gates, papers, costs, session control and the
 * live ledger. The ledger stream is a notification of change: each record received refreshes
 * the case from GET /v1/cases/:id (the one source of the case's state), debounced.
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import type { FormEvent } from 'react';
import { api } from '../api.js';
import type { ApiError, CaseDetail, CaseGate, CostTotals, LedgerEntry, Question, TaskNode, TaskPlan } from '../api.js';
import { Badge, Empty, ErrorBox, GateLink, Json, NotFound, Section, Short, TableHead, Time } from '../components/ui.js';
import { gapsOf, linkedToPrevious } from '../ledgerTimeline.js';
import { useApi } from '../useApi.js';
import { useLedgerStream } from '../useLedgerStream.js';

type Outcome = { status: number; ok: boolean; message: string } | undefined;

/** Runs one mutation and reports the server's answer (success or refusal) in words. */
async function act(method: string, path: string, body: unknown, done: string): Promise<NonNullable<Outcome>> {
  const r = await api<Record<string, unknown>>(method, path, body);
  if (r.ok) return { status: r.status, ok: true, message: done };
  return { status: r.status, ok: false, message: `${r.status} ${r.body.error}: ${r.body.message}` };
}

function OutcomeLine(props: { outcome: Outcome; testId?: string }) {
  if (!props.outcome) return null;
  return (
    <p className={props.outcome.ok ? 'ok-line' : 'error'} role="status" data-testid={props.testId} data-status={props.outcome.status}>
      {props.outcome.message}
    </p>
  );
}

export function CasePage(props: { caseId: string }) {
  const { reply, data, reload } = useApi<CaseDetail>(`/v1/cases/${encodeURIComponent(props.caseId)}`);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const refresh = useCallback(() => {
    if (timer.current !== undefined) return;
    timer.current = setTimeout(() => {
      timer.current = undefined;
      reload();
    }, 300);
  }, [reload]);
  useEffect(() => () => clearTimeout(timer.current), []);
  if (reply && !reply.ok && (reply.status === 404 || data === undefined)) return reply.status === 404 ? <NotFound what="case" /> : <ErrorBox status={reply.status} error={reply.body} />;
  if (!data) return <p className="muted">Loading…</p>;
  const c = data;
  return (
    <div data-testid="case-page" data-case-id={c.caseId}>
      {reply && !reply.ok ? <ErrorBox status={reply.status} error={reply.body} /> : null}
      <header className="page-head">
        <div>
          <h1>{c.title}</h1>
          <p className="muted">
            <Short value={c.caseId} /> · {c.caseType} · customer {c.customer} · opened <Time iso={c.createdAt} />
          </p>
        </div>
        <div className="head-badges">
          <Badge value={c.state} testId="case-state" />
          {c.parkedReason ? <Badge value={`parked: ${c.parkedReason}`} /> : null}
          {c.stopMode ? <Badge value={`stop: ${c.stopMode}`} /> : null}
        </div>
      </header>
      {objectiveText(c.objective) ? <p className="objective">{objectiveText(c.objective)}</p> : null}
      <div className="case-grid">
        <div className="case-main">
          <Section title="Agent graph" testId="agent-graph">
            {c.tasks.length === 0 ? <Empty>No task yet.</Empty> : <TaskTree nodes={c.tasks} />}
          </Section>
          <Section title="Plan" testId="plan">
            <Plans plans={c.plans} flat={c.plan} />
          </Section>
          <Section title="Gates" testId="case-gates">
            <Gates gates={c.gates} />
          </Section>
          <Section title="Questions" testId="questions">
            <Questions questions={c.questions} onChange={reload} />
          </Section>
          <Section title="Papers" testId="papers">
            <Papers papers={c.papers ?? []} />
          </Section>
          <Section title="Costs" testId="costs">
            <Costs costs={c.costs} />
          </Section>
          <Section title="Session" testId="session">
            <SessionControl c={c} onChange={reload} />
          </Section>
        </div>
        <div className="case-side"><LedgerTimeline caseId={c.caseId} onRecord={refresh} /></div>
      </div>
    </div>
  );
}

/** The case's objective as text: a string, or the `text` of the objective object the API returns. */
function objectiveText(o: unknown): string | null {
  if (typeof o === 'string') return o;
  if (typeof o === 'object' && o !== null && typeof (o as { text?: unknown }).text === 'string') return (o as { text: string }).text;
  return o === null || o === undefined ? null : JSON.stringify(o);
}

// ------------------------------------------------------------------------------- agent graph

function TaskTree(props: { nodes: readonly TaskNode[] }) {
  return (
    <ul className="tree">
      {props.nodes.map((t) => (
        <li key={t.id} data-testid="task-node" data-task-id={t.id} data-state={t.state}>
          <div className="task">
            <Badge value={t.state} />
            <strong className="task-profile">{t.profile}</strong>
            <Short value={t.id} />
            {t.parkReason ? <span className="park">parked: {t.parkReason}</span> : null}
            <span className="muted small">
              budget {fmt(t.budget.usedMinutes)} / {t.budget.limitMinutes === null ? '∞' : fmt(t.budget.limitMinutes)} min · {t.costs['modelCalls'] ?? 0} model calls · subtree{' '}
              {fmtCost(t.costsWithChildren)}
            </span>
          </div>
          {t.children.length > 0 ? <TaskTree nodes={t.children} /> : null}
        </li>
      ))}
    </ul>
  );
}

const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(2));
const fmtCost = (c: CostTotals) => `${c['inputTokens'] ?? '?'} in / ${c['outputTokens'] ?? '?'} out tokens`;

// ------------------------------------------------------------------------------- plans

function Plans(props: { plans: readonly TaskPlan[]; flat: CaseDetail['plan'] }) {
  if (props.plans.length === 0 && props.flat.length === 0) return <Empty>No plan submitted.</Empty>;
  if (props.plans.length === 0) return <StepTable steps={props.flat} />;
  return (
    <>
      {props.plans.map((p) => (
        <div key={p.taskId} className="plan" data-testid="task-plan">
          <p className="muted small">
            task <Short value={p.taskId} /> {p.root ? '(root)' : ''} · revision {p.latestRevision}
            {p.confirmedRevision === null ? ' · not confirmed' : ` · confirmed r${p.confirmedRevision}`}
          </p>
          <StepTable steps={p.current.length > 0 ? p.current : latestSteps(p)} />
          <details>
            <summary>{p.revisions.length} revision(s)</summary>
            <ol className="revisions">
              {p.revisions.map((r) => (
                <li key={r.revision} data-testid="plan-revision">
                  r{r.revision} · <Short value={r.planHash} /> · <Time iso={r.submittedAt} /> ·{' '}
                  {r.confirmation ? `confirmed by ${r.confirmation.by ?? '?'}` : 'unconfirmed'}
                  <ul>
                    {r.steps.map((s) => (
                      <li key={s.stepId}>
                        <code>{s.stepId}</code> {s.title}
                        {s.dependsOn.length ? <span className="muted"> after {s.dependsOn.join(', ')}</span> : null}
                      </li>
                    ))}
                  </ul>
                </li>
              ))}
            </ol>
          </details>
        </div>
      ))}
    </>
  );
}

/** A plan with no confirmed projection yet (a root's revisions are recorded, not confirmed): its latest revision's steps. */
function latestSteps(p: TaskPlan): CaseDetail['plan'] {
  const last = p.revisions.at(-1);
  return (last?.steps ?? []).map((s) => ({ stepId: s.stepId, title: s.title, dependsOn: s.dependsOn, revision: last!.revision, status: 'planned', taskId: p.taskId }));
}

function StepTable(props: { steps: CaseDetail['plan'] }) {
  return (
    <table className="table compact">
      <TableHead columns={['Step', 'Title', 'After', 'Status']} />
      <tbody>
        {props.steps.map((s) => (
          <tr key={`${s.taskId ?? ''}/${s.stepId}`} data-testid="plan-step">
            <td>
              <code>{s.stepId}</code>
            </td>
            <td>{s.title}</td>
            <td>{s.dependsOn.join(', ') || '—'}</td>
            <td>
              <Badge value={s.status} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

// ------------------------------------------------------------------------------- gates, questions, papers

function Gates(props: { gates: readonly CaseGate[] }) {
  if (props.gates.length === 0) return <Empty>No gate.</Empty>;
  return (
    <table className="table compact">
      <TableHead columns={['Gate', 'Operation', 'Class', 'Decisions', 'State', 'Opened']} />
      <tbody>
        {props.gates.map((g) => (
          <tr key={g.id} data-testid="case-gate" data-gate-id={g.id} data-state={g.state}>
            <td>
              <GateLink id={g.id} testId="gate-link" />
            </td>
            <td>
              <code>{g.operation}</code>
            </td>
            <td>{g.effectClass}</td>
            <td className="small">
              {(g.requiredDecisions ?? []).map((r) => {
                const given = g.decisions?.find((d) => d.decision === r.decision);
                return (
                  <div key={r.decision}>
                    <code>{r.decision}</code> ({r.role}) {given ? <><Badge value={given.verdict} /> by {given.principal}</> : <span className="muted">pending</span>}
                  </div>
                );
              })}
              {(g.requiredDecisions ?? []).length === 0 ? (g.roles?.join(', ') ?? '—') : null}
            </td>
            <td>
              <Badge value={g.state} />
            </td>
            <td>
              <Time iso={g.createdAt} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Questions(props: { questions: readonly Question[]; onChange: () => void }) {
  if (props.questions.length === 0) return <Empty>No question asked.</Empty>;
  return (
    <ul className="list">
      {props.questions.map((q) => (
        <li key={q.id} data-testid="question">
          <p>
            <Badge value={q.open ? 'open' : 'answered'} /> <strong>{q.decisionNeeded}</strong>
          </p>
          <p className="muted">{q.gap}</p>
          {q.open ? <AnswerForm q={q} onDone={props.onChange} /> : <p className="small">answered by {q.answeredBy ?? '?'}</p>}
        </li>
      ))}
    </ul>
  );
}

function alternativesOf(q: Question): { id: string; label: string }[] {
  if (!Array.isArray(q.alternatives)) return [];
  return (q.alternatives as unknown[]).flatMap((a) => {
    if (typeof a !== 'object' || a === null) return [];
    const o = a as Record<string, unknown>;
    const id = typeof o['id'] === 'string' ? o['id'] : undefined;
    return id ? [{ id, label: typeof o['label'] === 'string' ? o['label'] : typeof o['description'] === 'string' ? o['description'] : id }] : [];
  });
}

function AnswerForm(props: { q: Question; onDone: () => void }) {
  const [text, setText] = useState('');
  const [chosen, setChosen] = useState('');
  const [outcome, setOutcome] = useState<Outcome>();
  const alts = alternativesOf(props.q);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const body = { answer: text, ...(chosen ? { chosenAlternative: chosen } : {}) };
    const r = await act('POST', `/v1/questions/${props.q.id}/answer`, body, 'Answer sent.');
    setOutcome(r);
    if (r.ok) props.onDone();
  };
  return (
    <form className="inline-form" onSubmit={(e) => void submit(e)}>
      {alts.length > 0 ? (
        <select value={chosen} onChange={(e) => setChosen(e.target.value)}>
          <option value="">no alternative</option>
          {alts.map((a) => (
            <option key={a.id} value={a.id}>
              {a.label}
            </option>
          ))}
        </select>
      ) : null}
      <input value={text} onChange={(e) => setText(e.target.value)} placeholder="Your answer" required />
      <button type="submit">Answer</button>
      <OutcomeLine outcome={outcome} />
    </form>
  );
}

function Papers(props: { papers: readonly Record<string, unknown>[] }) {
  if (props.papers.length === 0) return <Empty>No paper.</Empty>;
  return (
    <table className="table compact">
      <TableHead columns={['Paper', 'Kind', 'Revision', 'Content', 'Provenance']} />
      <tbody>
        {props.papers.map((p) => {
          const prov = (p['provenance'] ?? {}) as { calls?: { callId: string; kind: string; toolName: string | null; as: string }[]; gates?: string[] };
          return (
            <tr key={String(p['id'])} data-testid="paper">
              <td>{String(p['name'] ?? p['id'])}</td>
              <td>{String(p['kind'] ?? '')}</td>
              <td>{String(p['revision'] ?? '')}</td>
              <td>{typeof p['contentHash'] === 'string' ? <Short value={p['contentHash']} /> : '—'}</td>
              <td className="small">
                {(prov.calls ?? []).map((c) => (
                  <div key={`${c.callId}/${c.as}`}>
                    {c.as} of {c.toolName ?? c.kind} <Short value={c.callId} />
                  </div>
                ))}
                {(prov.gates ?? []).map((g) => (
                  <div key={g}>
                    packet of gate{' '}
                    <GateLink id={g} />
                  </div>
                ))}
                {(prov.calls ?? []).length + (prov.gates ?? []).length === 0 ? '—' : null}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

const COST_LABELS: Record<string, string> = { modelCalls: 'model calls', inputTokens: 'input tokens', outputTokens: 'output tokens', cost: 'cost', activeMinutes: 'active minutes', waitingMinutes: 'waiting minutes' };

function Costs(props: { costs: CostTotals }) {
  return (
    <dl className="facts">
      {Object.entries(props.costs).map(([k, v]) => (
        <div key={k}>
          <dt>{COST_LABELS[k] ?? k}</dt>
          <dd>{v === null || v === undefined ? 'unknown' : fmt(v)}</dd>
        </div>
      ))}
    </dl>
  );
}

// ------------------------------------------------------------------------------- session control

function SessionControl(props: { c: CaseDetail; onChange: () => void }) {
  const [reason, setReason] = useState('');
  const [outcome, setOutcome] = useState<Outcome>();
  const s = props.c.session;
  const run = async (method: string, path: string, body: unknown, done: string) => {
    const r = await act(method, path, body, done);
    setOutcome(r);
    props.onChange();
  };
  const base = `/v1/cases/${props.c.caseId}`;
  return (
    <div>
      <dl className="facts">
        <div>
          <dt>state</dt>
          <dd>
            <Badge value={s.state} testId="session-state" />
          </dd>
        </div>
        <div>
          <dt>operated by</dt>
          <dd data-testid="controller">{s.controller ?? 'nobody yet'}</dd>
        </div>
        <div>
          <dt>since</dt>
          <dd>
            <Time iso={s.since} />
          </dd>
        </div>
      </dl>
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void run('POST', `${base}/session/takeover`, { reason }, 'You operate this case now.');
        }}
      >
        <input value={reason} onChange={(e) => setReason(e.target.value)} placeholder="Reason for taking over" required data-testid="takeover-reason" />
        <button type="submit" data-testid="takeover">
          Take over
        </button>
      </form>
      <div className="actions">
        <button onClick={() => void run('POST', `${base}/cancel`, { mode: 'soft', reason: reason || undefined }, 'Soft stop requested.')}>Stop (soft)</button>
        <button onClick={() => void run('POST', `${base}/resume`, { reason: reason || undefined }, 'Resumed.')}>Resume</button>
        <button className="danger" onClick={() => void run('POST', `${base}/cancel`, { mode: 'hard', reason: reason || undefined }, 'Case cancelled.')}>
          Cancel case
        </button>
      </div>
      <OutcomeLine outcome={outcome} testId="session-outcome" />
    </div>
  );
}

// ------------------------------------------------------------------------------- ledger

function LedgerTimeline(props: { caseId: string; onRecord: () => void }) {
  const { timeline, status, reconnects } = useLedgerStream(props.caseId, props.onRecord);
  const gaps = gapsOf(timeline);
  const entries = timeline.entries;
  return (
    <Section
      title="Ledger"
      testId="ledger"
      extra={
        <span className="ledger-status" data-testid="ledger-status" data-status={status} data-reconnects={reconnects} data-duplicates={timeline.duplicates} data-cursor={timeline.cursor}>
          <Badge value={status} /> <span className="muted small">seq {timeline.cursor} · {reconnects} reconnect(s) · {timeline.duplicates} duplicate(s) dropped</span>
        </span>
      }
    >
      {gaps.length > 0 ? (
        <p className="error" data-testid="ledger-gaps">
          Missing seq: {gaps.join(', ')}
        </p>
      ) : null}
      {status === 'not_found' ? <ErrorBox status={404} error={{ error: 'case_not_found', message: 'the ledger stream was refused' } satisfies ApiError} /> : null}
      {entries.length === 0 ? <Empty>Waiting for records…</Empty> : null}
      <ol className="timeline" data-testid="ledger-entries">
        {[...entries].reverse().map((e) => {
          const index = entries.indexOf(e);
          return <LedgerRow key={e.seq} e={e} linked={linkedToPrevious(entries, index)} />;
        })}
      </ol>
    </Section>
  );
}

function LedgerRow(props: { e: LedgerEntry; linked: boolean | null }) {
  const { e } = props;
  return (
    <li className="timeline-item" data-testid="ledger-entry" data-seq={e.seq} data-kind={e.kind}>
      <span className="seq">#{e.seq}</span>
      <div className="timeline-body">
        <div>
          <strong>{e.kind}</strong> <span className="muted small">{new Date(e.createdAt).toLocaleTimeString()}</span>{' '}
          {props.linked === false ? <Badge value="broken link" /> : props.linked === null ? <span className="muted small">(previous not shown)</span> : null}
        </div>
        <details>
          <summary className="small muted">{summarise(e.body)}</summary>
          <Json value={e.body} />
        </details>
      </div>
    </li>
  );
}

/** A one-line hint of a record's body: its scalar fields, shortened. */
function summarise(body: unknown): string {
  if (typeof body !== 'object' || body === null) return String(body);
  const parts = Object.entries(body as Record<string, unknown>)
    .filter(([, v]) => ['string', 'number', 'boolean'].includes(typeof v))
    .slice(0, 4)
    .map(([k, v]) => `${k}=${String(v).length > 24 ? `${String(v).slice(0, 24)}…` : String(v)}`);
  return parts.length ? parts.join(' ') : 'details';
}
