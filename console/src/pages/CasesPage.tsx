/**
 * Cases: the principal's cases, newest first (GET /v1/cases). State, park reason, customer,
 * origin (a prefix of the origin key: `api:`, `mail:`, a webhook source…) and title text are
 * server-side filters; the page keeps them in the address so a filtered view can be
 * shared. Age ("in its state for at least …") filters the page shown, from `stateSince`.
 * Paging follows the server's `next` cursor.
 */
import { useState } from 'react';
import type { FormEvent } from 'react';
import type { CaseSummary } from '../api.js';
import { Badge, CaseLink, Empty, ErrorBox, TableHead, age } from '../components/ui.js';
import { navigate, useLocation } from '../router.js';
import { useApi } from '../useApi.js';

const STATES = ['', 'opened', 'running', 'parked', 'at_gate', 'held', 'resolved', 'closed', 'cancelled'];
const AGES: readonly [string, number][] = [
  ['any age', 0],
  ['≥ 5 min', 5],
  ['≥ 1 hour', 60],
  ['≥ 1 day', 1440],
];
const PAGE = 25;
const FILTERS = ['state', 'parkReason', 'customer', 'origin', 'q'] as const;

export function CasesPage() {
  const loc = useLocation();
  const params = new URLSearchParams(loc.search);
  const minAge = Number(params.get('minAge') ?? '0') || 0;
  const query = new URLSearchParams();
  for (const f of FILTERS) {
    const v = params.get(f);
    if (v) query.set(f, v);
  }
  query.set('limit', String(PAGE));
  const before = params.get('before');
  if (before) query.set('before', before);
  const { reply, loading } = useApi<{ cases: CaseSummary[]; next: string | null }>(`/v1/cases?${query.toString()}`);

  const [draft, setDraft] = useState(() => Object.fromEntries([...FILTERS, 'minAge'].map((f) => [f, params.get(f) ?? ''])));
  const apply = (e: FormEvent) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const [k, v] of Object.entries(draft)) if (v && v !== '0') next.set(k, v);
    navigate(`/cases${next.size ? `?${next.toString()}` : ''}`);
  };
  const page = (cursor: string | null) => {
    const next = new URLSearchParams(params);
    if (cursor) next.set('before', cursor);
    else next.delete('before');
    navigate(`/cases?${next.toString()}`);
  };

  const now = Date.now();
  const rows = reply?.ok ? reply.body.cases.filter((c) => minAge === 0 || now - Date.parse(c.stateSince) >= minAge * 60_000) : [];
  return (
    <div data-testid="cases-page">
      <h1>Cases</h1>
      <form className="filters" onSubmit={apply} data-testid="case-filters">
        <label>
          State
          <select value={draft['state']} onChange={(e) => setDraft({ ...draft, state: e.target.value })} name="state">
            {STATES.map((s) => (
              <option key={s} value={s}>
                {s || 'any'}
              </option>
            ))}
          </select>
        </label>
        <label>
          Park reason
          <input value={draft['parkReason']} onChange={(e) => setDraft({ ...draft, parkReason: e.target.value })} name="parkReason" placeholder="e.g. gate" />
        </label>
        <label>
          Customer
          <input value={draft['customer']} onChange={(e) => setDraft({ ...draft, customer: e.target.value })} name="customer" />
        </label>
        <label>
          Age in state
          <select value={draft['minAge']} onChange={(e) => setDraft({ ...draft, minAge: e.target.value })} name="minAge">
            {AGES.map(([label, minutes]) => (
              <option key={minutes} value={String(minutes)}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <label className="grow">
          Origin
          <input value={draft['origin']} onChange={(e) => setDraft({ ...draft, origin: e.target.value })} name="origin" placeholder="origin key prefix, e.g. api: or mail:" data-testid="origin-search" />
        </label>
        <label className="grow">
          Title contains
          <input value={draft['q']} onChange={(e) => setDraft({ ...draft, q: e.target.value })} name="q" />
        </label>
        <button type="submit">Apply</button>
      </form>
      {reply && !reply.ok ? <ErrorBox status={reply.status} error={reply.body} /> : null}
      {loading && !reply ? <p className="muted">Loading…</p> : null}
      {reply?.ok ? (
        <>
          <table className="table" data-testid="cases-table">
            <TableHead columns={['Case', 'Title', 'Type', 'Customer', 'State', 'Park reason', 'In state', 'Opened']} />
            <tbody>
              {rows.map((c) => (
                <tr key={c.caseId} data-testid="case-row" data-case-id={c.caseId}>
                  <td>
                    <CaseLink id={c.caseId} />
                  </td>
                  <td>{c.title}</td>
                  <td>{c.caseType}</td>
                  <td>{c.customer}</td>
                  <td>
                    <Badge value={c.state} />
                    {c.stopMode ? <Badge value={`stop: ${c.stopMode}`} /> : null}
                  </td>
                  <td>{c.parkedReason ?? <span className="muted">—</span>}</td>
                  <td>{age(c.stateSince, now)}</td>
                  <td>{age(c.createdAt, now)} ago</td>
                </tr>
              ))}
            </tbody>
          </table>
          {rows.length === 0 ? <Empty>No case matches.</Empty> : null}
          <div className="pager">
            <button onClick={() => page(null)} disabled={!before}>
              First page
            </button>
            <button onClick={() => page(reply.body.next)} disabled={!reply.body.next} data-testid="next-page">
              Next page
            </button>
          </div>
        </>
      ) : null}
    </div>
  );
}
