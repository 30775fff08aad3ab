/** Open gates the principal may decide (GET /v1/gates?state=open): the approver's inbox. */
import type { GateView } from '../api.js';
import { Badge, CaseLink, Empty, ErrorBox, GateLink, TableHead, Time } from '../components/ui.js';
import { useApi } from '../useApi.js';

export function GatesPage() {
  const { reply } = useApi<{ gates: GateView[] }>('/v1/gates?state=open');
  return (
    <div data-testid="gates-page">
      <h1>Open gates</h1>
      {reply && !reply.ok ? <ErrorBox status={reply.status} error={reply.body} /> : null}
      {reply?.ok ? (
        reply.body.gates.length === 0 ? (
          <Empty>No open gate waits for a role you hold.</Empty>
        ) : (
          <table className="table">
            <TableHead columns={['Gate', 'Case', 'Operation', 'Summary', 'Decisions', 'Opened']} />
            <tbody>
              {reply.body.gates.map((g) => (
                <tr key={g.id} data-testid="gate-row" data-gate-id={g.id}>
                  <td>
                    <GateLink id={g.id} />
                  </td>
                  <td>
                    <CaseLink id={g.caseId} />
                  </td>
                  <td>
                    <code>{g.operation}</code>
                  </td>
                  <td>{g.summary ?? '—'}</td>
                  <td>
                    {g.decisions.map((d) => (
                      <span key={d.decision} className="pill">
                        {d.decision} ({d.role}) <Badge value={d.verdict ?? 'pending'} />
                      </span>
                    ))}
                  </td>
                  <td>
                    <Time iso={g.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )
      ) : null}
    </div>
  );
}
