/**
 * The fleet at a glance (GET /v1/fleet, role operator): services up, queues, outbox lag, parked
 * counts, and the fleet-wide stop (POST /v1/fleet/stop, /v1/fleet/resume).
 */
import { useState } from 'react';
import type { ReactNode } from 'react';
import { api } from '../api.js';
import { Badge, Empty, ErrorBox, Section, TableHead, Time } from '../components/ui.js';
import { useApi } from '../useApi.js';

interface FleetView {
  readonly tasks: Record<string, number>;
  readonly parked: Record<string, number>;
  readonly outbox: { pending: number; lagSeconds: number };
  readonly queues: readonly { queue: string; messages: number; consumers: number }[];
  readonly stops: readonly { kind: string; active: boolean; reason: string | null; changedBy: string | null; changedAt: string | null }[];
  readonly workers?: readonly { owner: string; runningTasks: number; leaseUntil: string }[];
}

/** The service a work queue belongs to: its last segment (`<prefix>.<service>`). */
function serviceOf(queue: string): string {
  return queue.split('.').at(-1) ?? queue;
}

export function FleetPage() {
  const { reply, reload } = useApi<FleetView>('/v1/fleet');
  if (reply && !reply.ok) return <ErrorBox status={reply.status} error={reply.body} />;
  if (!reply) return <p className="muted">Loading…</p>;
  const f = reply.body;
  const consumersByService = new Map<string, number>();
  for (const q of f.queues) if (!q.queue.endsWith('.dead')) consumersByService.set(serviceOf(q.queue), (consumersByService.get(serviceOf(q.queue)) ?? 0) + q.consumers);
  return (
    <div data-testid="fleet-page">
      <header className="page-head">
        <h1>Fleet</h1>
        <button onClick={reload}>Refresh</button>
      </header>
      <div className="tiles">
        <Tile label="outbox pending" value={f.outbox.pending} testId="outbox-pending" />
        <Tile label="outbox lag" value={`${f.outbox.lagSeconds.toFixed(1)} s`} />
        <Tile label="parked tasks" value={Object.values(f.parked).reduce((a, b) => a + b, 0)} />
        <Tile label="fleet stops in force" value={f.stops.filter((x) => x.active).length} />
      </div>
      <Section title="Services" testId="fleet-services">
        {consumersByService.size === 0 ? (
          <Empty>No queue reported.</Empty>
        ) : (
          <table className="table compact">
            <TableHead columns={['Service', 'Consumers', 'Up']} />
            <tbody>
              <tr data-testid="fleet-service">
                <td>intake</td>
                <td>—</td>
                <td>
                  <span className="badge badge-ok">up</span> <span className="muted small">answered this page</span>
                </td>
              </tr>
              {[...consumersByService.entries()].map(([s, n]) => (
                <tr key={s} data-testid="fleet-service">
                  <td>{s}</td>
                  <td>{n}</td>
                  <td>{n > 0 ? <span className="badge badge-ok">up</span> : <span className="badge badge-bad">no consumer</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {f.workers && f.workers.length > 0 ? (
          <table className="table compact">
            <TableHead columns={['Worker', 'Running tasks', 'Lease until']} />
            <tbody>
              {f.workers.map((w) => (
                <tr key={w.owner}>
                  <td>
                    <code>{w.owner}</code>
                  </td>
                  <td>{w.runningTasks}</td>
                  <td>
                    <Time iso={w.leaseUntil} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : null}
      </Section>
      <Section title="Queue depths" testId="fleet-queues">
        <table className="table compact">
          <TableHead columns={['Queue', 'Messages', 'Consumers']} />
          <tbody>
            {f.queues.map((q) => (
              <tr key={q.queue} data-testid="fleet-queue">
                <td>
                  <code>{q.queue}</code>
                </td>
                <td>{q.messages}</td>
                <td>{q.consumers}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      <div className="two">
        <Section title="Tasks by state">
          <Counts counts={f.tasks} />
        </Section>
        <Section title="Parked by class">
          <Counts counts={f.parked} />
        </Section>
      </div>
      <Section title="Fleet-wide stop" testId="fleet-stops">
        <FleetStop stops={f.stops} onChange={reload} />
      </Section>
    </div>
  );
}

function Tile(props: { label: string; value: ReactNode; testId?: string }) {
  return (
    <div className="tile" data-testid={props.testId}>
      <div className="tile-value">{props.value}</div>
      <div className="tile-label">{props.label}</div>
    </div>
  );
}

function Counts(props: { counts: Record<string, number> }) {
  const entries = Object.entries(props.counts);
  if (entries.length === 0) return <Empty>None.</Empty>;
  return (
    <dl className="facts">
      {entries.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

function FleetStop(props: { stops: FleetView['stops']; onChange: () => void }) {
  const [reason, setReason] = useState('');
  const [result, setResult] = useState<{ ok: boolean; status: number; text: string } | undefined>();
  const run = async (path: string, body: Record<string, unknown>, done: string) => {
    const r = await api('POST', path, body);
    setResult(r.ok ? { ok: true, status: r.status, text: done } : { ok: false, status: r.status, text: `${r.status} ${r.body.error}: ${r.body.message}` });
    props.onChange();
  };
  return (
    <>
      <table className="table compact">
        <TableHead columns={['Kind', 'State', 'Reason', 'Changed by', 'When']} />
        <tbody>
          {props.stops.map((x) => (
            <tr key={x.kind}>
              <td>{x.kind}</td>
              <td>
                <Badge value={x.active ? 'stopped' : 'live'} />
              </td>
              <td>{x.reason ?? '—'}</td>
              <td>{x.changedBy ?? '—'}</td>
              <td>
                <Time iso={x.changedAt} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form className="inline-form" onSubmit={(e) => e.preventDefault()}>
        <input value={reason} onChange={(e) => setReason(e.target.value)} placeholder="Reason (required to stop)" />
        <button type="button" disabled={!reason.trim()} onClick={() => void run('/v1/fleet/stop', { kind: 'soft', reason }, 'Soft stop in force: no new case is admitted, running tasks park.')}>
          Soft stop
        </button>
        <button type="button" className="danger" disabled={!reason.trim()} onClick={() => void run('/v1/fleet/stop', { kind: 'hard', reason }, 'Hard stop in force: no new dispatch.')}>
          Hard stop
        </button>
        <button type="button" onClick={() => void run('/v1/fleet/resume', reason.trim() ? { reason } : {}, 'Resumed.')}>
          Resume
        </button>
      </form>
      {result ? (
        <p className={result.ok ? 'ok-line' : 'error'} data-status={result.status}>
          {result.text}
        </p>
      ) : null}
    </>
  );
}
