/**
 * Which decisions a packet needs (seed 004 §5 "Gating derives all applicable decisions"). Pure.
 *
 * The gate derives; it never takes the requester's word for it. Sources, all unioned:
 * - the gate policy of the packet's effect class;
 * - the gate policy of the effect class the fleet config registers for the operation, when the
 *   fleet declares the operation (a packet cannot pick a cheaper class than its operation has);
 * - decisions the requester asked for (e.g. a customer-facing H5 on top of HW-ddl), each mapped
 *   to the role some policy assigns it.
 * Fail closed: a class without a policy, a requested decision no policy assigns a role, one
 * decision name mapped to two roles, or a gate that would need no decision at all is a problem,
 * and a gate with problems is refused rather than opened.
 */
import type { FleetConfig } from '@everdict/contracts';
import type { RequiredDecision } from '@everdict/store';

export interface DecisionDerivation {
  /** Sorted by decision name: the gate's required decisions, one per name. */
  readonly decisions: readonly RequiredDecision[];
  /** Why the gate cannot be opened; empty when it can. Never echoes packet values beyond names. */
  readonly problems: readonly string[];
}

interface PacketFacts {
  readonly connector: string;
  readonly operation: string;
  readonly effectClass: string;
  /** Decisions the requester believes apply. */
  readonly requested: readonly string[];
}

export function deriveDecisions(facts: PacketFacts, fleet: Pick<FleetConfig, 'gatePolicies' | 'connectors'>): DecisionDerivation {
  const policies = fleet.gatePolicies ?? {};
  const problems: string[] = [];
  const classes = [facts.effectClass];

  const declared = fleet.connectors?.[facts.connector];
  if (declared !== undefined) {
    const op = Object.hasOwn(declared.operations, facts.operation) ? declared.operations[facts.operation] : undefined;
    if (op === undefined) problems.push(`operation ${facts.operation} is not registered for connector ${facts.connector}`);
    else if (op.access !== 'write') problems.push(`operation ${facts.operation} is a read; only writes pass a gate`);
    else if (op.effectClass !== undefined && op.effectClass !== facts.effectClass) classes.push(op.effectClass);
  }

  const byName = new Map<string, string>();
  const add = (decision: string, role: string, from: string) => {
    const known = byName.get(decision);
    if (known !== undefined && known !== role) problems.push(`decision ${decision} is assigned to two roles (${known}, ${role}) by ${from}`);
    else byName.set(decision, role);
  };

  for (const cls of classes) {
    const policy = Object.hasOwn(policies, cls) ? policies[cls] : undefined;
    if (policy === undefined) {
      problems.push(`no gate policy for effect class ${cls}`);
      continue;
    }
    for (const d of policy.decisions) add(d.decision, d.role, `the ${cls} policy`);
  }

  for (const decision of facts.requested) {
    if (byName.has(decision)) continue;
    const role = roleOf(decision, policies);
    if (role === undefined) problems.push(`requested decision ${decision} has no role in any gate policy`);
    else add(decision, role, 'the request');
  }

  if (byName.size === 0 && problems.length === 0) problems.push(`the gate policy of ${facts.effectClass} requires no decision; a grant needs at least one`);
  const decisions = [...byName.entries()].map(([decision, role]) => ({ decision, role })).sort((a, b) => (a.decision < b.decision ? -1 : a.decision > b.decision ? 1 : 0));
  return { decisions, problems };
}

function roleOf(decision: string, policies: NonNullable<FleetConfig['gatePolicies']>): string | undefined {
  for (const policy of Object.values(policies)) {
    const hit = policy?.decisions.find((d) => d.decision === decision);
    if (hit) return hit.role;
  }
  return undefined;
}

/** The decisions still missing an approval, given the recorded ones (each bound to `digest`). */
export function pendingDecisions(
  required: readonly RequiredDecision[],
  recorded: readonly { decision: string; verdict: string; digest: string }[],
  digest: string,
): RequiredDecision[] {
  return required.filter((r) => !recorded.some((d) => d.decision === r.decision && d.verdict === 'approve' && d.digest === digest));
}
