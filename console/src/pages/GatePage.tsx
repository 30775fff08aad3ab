/**
 * One gate: the exact packet a decision binds to, and the decide action. A verdict is sent with
 * the packet digest this page shows, so it can only land on the packet the operator read (the
 * server refuses any other with 409 `digest_mismatch`). When the principal holds the role of
 * several required decisions, one click sends each of them as its own request — each recorded
 * separately, each answered on its own line. Which decisions the principal may give is the
 * server's `canDecide`; the server still checks every request.
 */
import { useState } from 'react';
import { api } from '../api.js';
import type { GateDecisionView, GateView } from '../api.js';
import { Badge, CaseLink, Empty, ErrorBox, Json, NotFound, Section, Short, TableHead, Time } from '../components/ui.js';
import { useApi } from '../useApi.js';

interface DecisionResult {
  readonly decision: string;
  readonly status: number;
  readonly ok: boolean;
  readonly message: string;
}

export function GatePage(props: { gateId: string }) {
  const { reply, reload } = useApi<GateView>(`/v1/gates/${encodeURIComponent(props.gateId)}`);
  if (reply && !reply.ok && reply.status === 404) return <NotFound what="gate" />;
  if (reply && !reply.ok) return <ErrorBox status={reply.status} error={reply.body} />;
  if (!reply) return <p className="muted">Loading…</p>;
  const g = reply.body;
  return (
    <div data-testid="gate-page" data-gate-id={g.id}>
      <header className="page-head">
        <div>
          <h1>
            Gate <Short value={g.id} />
          </h1>
          <p className="muted">
            {g.kind} gate of case{' '}
            <CaseLink id={g.caseId} testId="gate-case-link" />{' '}
            · task <Short value={g.taskId} /> · opened <Time iso={g.createdAt} />
            {g.expiresAt ? (
              <>
                {' '}
                · expires <Time iso={g.expiresAt} />
              </>
            ) : null}
          </p>
        </div>
        <Badge value={g.state} testId="gate-state" />
      </header>
      {g.summary ? <p className="objective">{g.summary}</p> : null}
      <Section title="Packet digest">
        <code className="digest" data-testid="packet-digest">
          {g.packetDigest}
        </code>
        <p className="muted small">Your verdict is bound to this digest: a packet changed after you read it cannot be approved with it.</p>
      </Section>
      <Decide gate={g} onDecided={reload} />
      {g.packetProblem ? <p className="error">The packet cannot be read ({g.packetProblem}); the coordinator refuses it.</p> : null}
      {g.packet ? <Packet packet={g.packet} /> : null}
      {g.consent ? (
        <Section title="Consent: the exact call">
          <Json value={g.consent} />
        </Section>
      ) : null}
      {g.grant ? (
        <Section title="Grant">
          <p>
            <Short value={g.grant.id} /> <Badge value={g.grant.state} /> expires <Time iso={g.grant.expiresAt} />
          </p>
        </Section>
      ) : null}
    </div>
  );
}

function Decide(props: { gate: GateView; onDecided: () => void }) {
  const [reason, setReason] = useState('');
  const [results, setResults] = useState<readonly DecisionResult[]>([]);
  const [busy, setBusy] = useState(false);
  const g = props.gate;
  const mine = g.decisions.filter((d) => d.canDecide);

  const decide = async (verdict: 'approve' | 'reject') => {
    setBusy(true);
    const out: DecisionResult[] = [];
    // One request per decision, in order: each is its own recorded decision row.
    for (const d of mine) {
      const body = { decision: d.decision, verdict, digest: g.packetDigest, ...(reason.trim() ? { reason: reason.trim() } : {}) };
      const r = await api<{ gateState: string; pending: string[] }>('POST', `/v1/gates/${g.id}/decisions`, body);
      out.push(
        r.ok
          ? { decision: d.decision, status: r.status, ok: true, message: `${verdict} recorded; gate ${r.body.gateState}${r.body.pending.length ? `, pending ${r.body.pending.join(', ')}` : ''}` }
          : { decision: d.decision, status: r.status, ok: false, message: `${r.status} ${r.body.error}: ${r.body.message}` },
      );
      setResults([...out]);
    }
    setBusy(false);
    props.onDecided();
  };

  return (
    <Section title="Decisions" testId="decisions">
      <table className="table compact">
        <TableHead columns={['Decision', 'Role', 'Verdict', 'By', 'When']} />
        <tbody>
          {g.decisions.map((d: GateDecisionView) => (
            <tr key={d.decision} data-testid="decision" data-decision={d.decision}>
              <td>
                <code>{d.decision}</code>
              </td>
              <td>{d.role}</td>
              <td>{d.verdict ? <Badge value={d.verdict} /> : d.canDecide ? <span className="muted">yours to give</span> : <span className="muted">pending</span>}</td>
              <td>{d.principal ?? '—'}</td>
              <td>
                <Time iso={d.decidedAt} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {mine.length > 0 ? (
        <div className="decide" data-testid="decide">
          <input value={reason} onChange={(e) => setReason(e.target.value)} placeholder="Reason (optional)" />
          <button onClick={() => void decide('approve')} disabled={busy} data-testid="approve">
            Approve {mine.length > 1 ? `(${mine.map((d) => d.decision).join(' + ')})` : mine[0]!.decision}
          </button>
          <button className="danger" onClick={() => void decide('reject')} disabled={busy} data-testid="reject">
            Reject
          </button>
        </div>
      ) : (
        <p className="muted small" data-testid="no-decide">
          No decision of this gate is yours to give.
        </p>
      )}
      {results.map((r) => (
        <p key={r.decision} className={r.ok ? 'ok-line' : 'error'} data-testid="decision-result" data-status={r.status}>
          <code>{r.decision}</code>: {r.message}
        </p>
      ))}
    </Section>
  );
}

/** The packet as approved: every field the digest covers, shown in the order a reviewer reads it. */
function Packet(props: { packet: Record<string, unknown> }) {
  const p = props.packet;
  const op = (p['operation'] ?? {}) as Record<string, unknown>;
  const params = (p['params'] ?? {}) as Record<string, unknown>;
  const checks = (k: string) => (Array.isArray(p[k]) ? (p[k] as unknown[]) : []);
  const evidence = checks('evidence');
  const verdicts = checks('verdicts');
  return (
    <>
      <Section title="Operation" testId="packet-operation">
        <dl className="facts">
          <div>
            <dt>operation</dt>
            <dd>
              <code>
                {String(op['connector'] ?? '')}/{String(op['name'] ?? '')}
              </code>
            </dd>
          </div>
          <div>
            <dt>effect class</dt>
            <dd>{String(p['effectClass'] ?? '')}</dd>
          </div>
          <div>
            <dt>target</dt>
            <dd>
              <code>{JSON.stringify(p['target'])}</code>
            </dd>
          </div>
          <div>
            <dt>plan step</dt>
            <dd>
              <code>{String(p['planStepId'] ?? '')}</code> (revision {String(p['planRevision'] ?? '')})
            </dd>
          </div>
          <div>
            <dt>impact keys</dt>
            <dd>{(Array.isArray(p['impactKeys']) ? (p['impactKeys'] as string[]) : []).join(', ')}</dd>
          </div>
        </dl>
      </Section>
      <Section title="Bound parameters" testId="packet-params">
        {Object.keys(params).length === 0 ? (
          <Empty>None.</Empty>
        ) : (
          <table className="table compact">
            <tbody>
              {Object.entries(params).map(([k, v]) => (
                <tr key={k}>
                  <th>{k}</th>
                  <td>
                    <code>{JSON.stringify(v)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Section>
      <Section title="Expected counts" testId="packet-counts">
        <Json value={p['expectedCounts'] ?? {}} />
      </Section>
      <Section title="Preconditions" testId="packet-preconditions">
        {checks('preconditions').length === 0 ? <Empty>None.</Empty> : <Json value={checks('preconditions')} />}
      </Section>
      <Section title="Assertions" testId="packet-assertions">
        {checks('assertions').length === 0 ? <Empty>None.</Empty> : <Json value={checks('assertions')} />}
      </Section>
      <Section title="Revert" testId="packet-revert">
        <Json value={p['revert'] ?? null} />
      </Section>
      <Section title="Cited evidence" testId="packet-evidence">
        {evidence.length === 0 ? (
          <Empty>No evidence cited.</Empty>
        ) : (
          <ul className="list">
            {evidence.map((e, i) => (
              <li key={i} data-testid="evidence">
                <Json value={e} />
              </li>
            ))}
          </ul>
        )}
      </Section>
      <Section title="Audit verdict" testId="packet-audit">
        {verdicts.length === 0 ? (
          <Empty>No audit verdict attached.</Empty>
        ) : (
          <ul className="list">
            {verdicts.map((v, i) => {
              const o = (v ?? {}) as Record<string, unknown>;
              return (
                <li key={i} data-testid="audit-verdict">
                  <Badge value={typeof o['verdict'] === 'string' ? o['verdict'] : null} /> {String(o['by'] ?? o['principal'] ?? o['auditor'] ?? '')}
                  <Json value={v} />
                </li>
              );
            })}
          </ul>
        )}
      </Section>
    </>
  );
}
