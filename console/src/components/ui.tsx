/** Small presentational pieces shared by the pages: links, badges, errors, times, raw JSON. */
import type { MouseEvent, ReactNode } from 'react';
import type { ApiError } from '../api.js';
import { BASE, navigate } from '../router.js';

export function Link(props: { to: string; children: ReactNode; className?: string; testId?: string }) {
  const href = props.to.startsWith(BASE) ? props.to : `${BASE}${props.to}`;
  const go = (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return (
    <a href={href} onClick={go} className={props.className} data-testid={props.testId}>
      {props.children}
    </a>
  );
}

const TONE: Record<string, string> = {
  open: 'warn',
  opened: 'info',
  at_gate: 'warn',
  held: 'warn',
  parked: 'warn',
  waiting: 'warn',
  reconnecting: 'warn',
  connecting: 'warn',
  pending: 'warn',
  unknown: 'warn',
  running: 'info',
  planned: 'info',
  runnable: 'info',
  active: 'info',
  live: 'ok',
  done: 'ok',
  resolved: 'ok',
  approved: 'ok',
  approve: 'ok',
  applied: 'ok',
  completed: 'ok',
  closed: 'muted',
  cancelled: 'muted',
  expired: 'muted',
  stopped: 'bad',
  failed: 'bad',
  rejected: 'bad',
  reject: 'bad',
  revoked: 'bad',
  not_found: 'bad',
};

export function Badge(props: { value: string | null | undefined; testId?: string }) {
  const v = props.value ?? '—';
  return (
    <span className={`badge badge-${TONE[v] ?? 'plain'}`} data-testid={props.testId}>
      {v}
    </span>
  );
}

/** The server's refusal, as it said it: status, code and message (the server decides, the UI shows). */
export function ErrorBox(props: { status: number; error: ApiError }) {
  return (
    <div className="error" role="alert" data-testid="api-error" data-status={props.status}>
      <strong>{props.status === 0 ? 'network error' : `${props.status} ${props.error.error}`}</strong> {props.error.message}
      {props.error.field ? <span className="muted"> (field {props.error.field})</span> : null}
    </div>
  );
}

export function NotFound(props: { what: string }) {
  return (
    <section className="notfound" data-testid="not-found">
      <h1>404 — not found</h1>
      <p>No {props.what} you may see has this address.</p>
      <Link to="/cases">Back to cases</Link>
    </section>
  );
}

/** A duration like "42s", "3m", "2h 5m" or "1d 4h". */
export function span(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** How long ago an ISO timestamp was. */
export function age(iso: string, now: number = Date.now()): string {
  return span(now - Date.parse(iso));
}

function relative(iso: string): string {
  const d = Date.parse(iso) - Date.now();
  return d > 0 ? `in ${span(d)}` : `${span(-d)} ago`;
}

export function Time(props: { iso: string | null | undefined }) {
  if (!props.iso) return <span className="muted">—</span>;
  return (
    <time dateTime={props.iso} title={props.iso}>
      {new Date(props.iso).toLocaleString()} <span className="muted">({relative(props.iso)})</span>
    </time>
  );
}

export function Json(props: { value: unknown; testId?: string }) {
  return (
    <pre className="json" data-testid={props.testId}>
      {JSON.stringify(props.value, null, 2)}
    </pre>
  );
}

export function Section(props: { title: string; children: ReactNode; testId?: string; extra?: ReactNode }) {
  return (
    <section className="card" data-testid={props.testId}>
      <header className="card-head">
        <h2>{props.title}</h2>
        {props.extra}
      </header>
      {props.children}
    </section>
  );
}

export function Empty(props: { children: ReactNode }) {
  return <p className="muted empty">{props.children}</p>;
}

/** Short form of a uuid or digest for tables; the full value stays in the title. */
export function Short(props: { value: string; testId?: string }) {
  const short = props.value.startsWith('sha256:') ? `${props.value.slice(0, 15)}…` : props.value.length > 12 ? `${props.value.slice(0, 8)}…` : props.value;
  return (
    <code title={props.value} data-testid={props.testId}>
      {short}
    </code>
  );
}

/** A case's short id, linking to its page. */
export function CaseLink(props: { id: string; testId?: string }) {
  return (
    <Link to={`/cases/${props.id}`} testId={props.testId}>
      <Short value={props.id} />
    </Link>
  );
}

/** A gate's short id, linking to its page. */
export function GateLink(props: { id: string; testId?: string }) {
  return (
    <Link to={`/gates/${props.id}`} testId={props.testId}>
      <Short value={props.id} />
    </Link>
  );
}

/** A table's header row: one cell per column name (an empty name leaves its cell blank). */
export function TableHead(props: { columns: readonly string[] }) {
  return (
    <thead>
      <tr>
        {props.columns.map((c, i) => (
          <th key={i}>{c}</th>
        ))}
      </tr>
    </thead>
  );
}
