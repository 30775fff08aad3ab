/**
 * What needs a person (GET /v1/exceptions, role operator): parked tasks by class and age,
 * effects whose outcome is unknown (record the outcome, POST /v1/effects/:callId/outcome),
 * dead letters (inspect; replay through the inbox, POST /v1/dead-letters/:id/replay), consumer
 * refusals and restore failures.
 */
import { useState } from 'react';
import type { FormEvent } from 'react';
import { api } from '../api.js';
import { CaseLink, Empty, ErrorBox, Json, Section, Short, TableHead, Time } from '../components/ui.js';
import { useApi } from '../useApi.js';

interface ExceptionsView {
  readonly at: string;
  readonly parked: readonly { class: string; tasks: number; oldestParkedAt: string | null; oldestAgeSeconds: number | null; oldest: readonly { taskId: string; caseId: string; customer: string; parkedAt: string | null; ageSeconds: number | null }[] }[];
  readonly unknownOutcomes: readonly { callId: string; caseId: string; taskId: string; operation: string; status: string; createdAt: string; ageSeconds: number }[];
  readonly deadLetters: { available: boolean; error?: string; queues: readonly { queue: string; messages: number }[]; messages: readonly DeadLetter[] };
  readonly refusals: readonly { seq: number; consumer: string; messageId: string; type: string; reason: string; detail: unknown; recordedAt: string }[];
  readonly restoreFailures: readonly { taskId: string; caseId: string; reason: string; error: string | null; parkedAt: string | null; ageSeconds: number | null }[];
}

interface DeadLetter {
  readonly id: string;
  readonly queue: string;
  readonly originalQueue: string | null;
  readonly reason: string | null;
  readonly deaths: number;
  readonly deadLetteredAt: string | null;
  readonly type: string | null;
  readonly caseId: string | null;
  readonly sender: string | null;
  readonly sizeBytes: number;
}

const ageText = (s: number | null) => (s === null ? '—' : s < 120 ? `${Math.round(s)} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`);

export function ExceptionsPage() {
  const { reply, reload } = useApi<ExceptionsView>('/v1/exceptions');
  if (reply && !reply.ok) return <ErrorBox status={reply.status} error={reply.body} />;
  if (!reply) return <p className="muted">Loading…</p>;
  const x = reply.body;
  return (
    <div data-testid="exceptions-page">
      <header className="page-head">
        <h1>Exceptions</h1>
        <button onClick={reload}>Refresh</button>
      </header>
      <Section title="Parked tasks by class" testId="parked-classes">
        {x.parked.length === 0 ? (
          <Empty>No parked task.</Empty>
        ) : (
          <table className="table compact">
            <TableHead columns={['Class', 'Tasks', 'Oldest', 'Oldest tasks']} />
            <tbody>
              {x.parked.map((p) => (
                <tr key={p.class} data-testid="parked-class">
                  <td>{p.class}</td>
                  <td>{p.tasks}</td>
                  <td>{ageText(p.oldestAgeSeconds)}</td>
                  <td className="small">
                    {p.oldest.slice(0, 5).map((t) => (
                      <div key={t.taskId}>
                        <CaseLink id={t.caseId} />{' '}
                        {t.customer} · {ageText(t.ageSeconds)}
                      </div>
                    ))}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <Section title="Unknown outcomes" testId="unknown-outcomes">
        {x.unknownOutcomes.length === 0 ? (
          <Empty>No effect in doubt.</Empty>
        ) : (
          <ul className="list">
            {x.unknownOutcomes.map((u) => (
              <li key={u.callId} data-testid="unknown-outcome">
                <p>
                  <code>{u.operation}</code> · call <Short value={u.callId} /> · case{' '}
                  <CaseLink id={u.caseId} />{' '}
                  · {u.status} · {ageText(u.ageSeconds)}
                </p>
                <OutcomeForm callId={u.callId} onDone={reload} />
              </li>
            ))}
          </ul>
        )}
      </Section>
      <Section title="Dead letters" testId="dead-letters">
        <DeadLetters view={x.deadLetters} onDone={reload} />
      </Section>
      <Section title="Consumer refusals" testId="refusals">
        {x.refusals.length === 0 ? (
          <Empty>No refusal recorded.</Empty>
        ) : (
          <table className="table compact">
            <TableHead columns={['Consumer', 'Type', 'Reason', 'Message', 'When']} />
            <tbody>
              {x.refusals.map((r) => (
                <tr key={r.seq}>
                  <td>{r.consumer}</td>
                  <td>{r.type}</td>
                  <td>{r.reason}</td>
                  <td>
                    <Short value={r.messageId} />
                  </td>
                  <td>
                    <Time iso={r.recordedAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <Section title="Restore failures" testId="restore-failures">
        {x.restoreFailures.length === 0 ? (
          <Empty>No restore failure.</Empty>
        ) : (
          <table className="table compact">
            <TableHead columns={['Case', 'Task', 'Reason', 'Error', 'Age']} />
            <tbody>
              {x.restoreFailures.map((f) => (
                <tr key={f.taskId}>
                  <td>
                    <CaseLink id={f.caseId} />
                  </td>
                  <td>
                    <Short value={f.taskId} />
                  </td>
                  <td>{f.reason}</td>
                  <td>{f.error ?? '—'}</td>
                  <td>{ageText(f.ageSeconds)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
    </div>
  );
}

function OutcomeForm(props: { callId: string; onDone: () => void }) {
  const [outcome, setOutcome] = useState('applied');
  const [evidence, setEvidence] = useState('');
  const [result, setResult] = useState<{ ok: boolean; status: number; text: string } | undefined>();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const r = await api<{ conclusive: boolean }>('POST', `/v1/effects/${props.callId}/outcome`, { outcome, evidence });
    setResult(r.ok ? { ok: true, status: r.status, text: `Recorded (${r.body.conclusive ? 'conclusive' : 'not conclusive'}).` } : { ok: false, status: r.status, text: `${r.status} ${r.body.error}: ${r.body.message}` });
    if (r.ok) props.onDone();
  };
  return (
    <form className="inline-form" onSubmit={(e) => void submit(e)} data-testid="outcome-form">
      <select value={outcome} onChange={(e) => setOutcome(e.target.value)}>
        <option value="applied">applied</option>
        <option value="not_applied">not applied</option>
        <option value="partly_applied">partly applied</option>
      </select>
      <input value={evidence} onChange={(e) => setEvidence(e.target.value)} placeholder="What you checked (evidence)" required />
      <button type="submit">Record outcome</button>
      {result ? (
        <span className={result.ok ? 'ok-line' : 'error'} data-status={result.status}>
          {result.text}
        </span>
      ) : null}
    </form>
  );
}

function DeadLetters(props: { view: ExceptionsView['deadLetters']; onDone: () => void }) {
  const [inspected, setInspected] = useState<string | undefined>();
  const [result, setResult] = useState<{ id: string; ok: boolean; status: number; text: string } | undefined>();
  const v = props.view;
  if (!v.available) return <p className="error">Dead letters are unavailable{v.error ? `: ${v.error}` : ''}.</p>;
  const replay = async (id: string) => {
    const r = await api('POST', `/v1/dead-letters/${encodeURIComponent(id)}/replay`, {});
    setResult({ id, ok: r.ok, status: r.status, text: r.ok ? 'Replayed through the inbox.' : `${r.status} ${r.body.error}: ${r.body.message}` });
    if (r.ok) props.onDone();
  };
  return (
    <>
      <p className="muted small">{v.queues.map((q) => `${q.queue}: ${q.messages}`).join(' · ') || 'No dead-letter queue.'}</p>
      {v.messages.length === 0 ? (
        <Empty>No dead letter.</Empty>
      ) : (
        <table className="table compact">
          <TableHead columns={['Message', 'Type', 'From queue', 'Reason', 'Deaths', 'When', '']} />
          <tbody>
            {v.messages.map((d) => (
              <tr key={`${d.queue}/${d.id}`} data-testid="dead-letter">
                <td>
                  <Short value={d.id} />
                </td>
                <td>{d.type ?? '—'}</td>
                <td>
                  <code>{d.originalQueue ?? '?'}</code>
                </td>
                <td>{d.reason ?? '—'}</td>
                <td>{d.deaths}</td>
                <td>
                  <Time iso={d.deadLetteredAt} />
                </td>
                <td>
                  <button onClick={() => setInspected(inspected === d.id ? undefined : d.id)}>Inspect</button>{' '}
                  <button onClick={() => void replay(d.id)} disabled={!d.id}>
                    Replay
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {inspected ? <Json value={v.messages.find((d) => d.id === inspected)} /> : null}
      {result ? (
        <p className={result.ok ? 'ok-line' : 'error'} data-status={result.status}>
          <Short value={result.id} />: {result.text}
        </p>
      ) : null}
    </>
  );
}
