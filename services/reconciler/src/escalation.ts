/**
 * Deadline escalation (issue 13 item 6): the pure decision of what an expired deadline does, from
 * the case type's `escalation` rule. Never silent: a deadline whose rule vanished from the config
 * still escalates (to an operator), and a re-ask happens once — its next expiry parks for an operator.
 */
import type { FleetConfig, FleetEscalationRule } from '@everdict/contracts';
import type { DeadlineRule, DeadlineSubject } from '@everdict/store';

export type Escalation =
  | { readonly action: 'notify_role'; readonly role: string }
  | { readonly action: 'reask'; readonly extendMs: number }
  | { readonly action: 'park_for_operator'; readonly reason: string };

/** Every case type's rule for `subject`, as the store's stamping query takes them. */
export function deadlineRules(fleet: FleetConfig, subject: DeadlineSubject): DeadlineRule[] {
  const out: DeadlineRule[] = [];
  for (const [caseType, ct] of Object.entries(fleet.caseTypes)) {
    const rule = ct?.escalation?.[subject];
    if (rule) out.push({ caseType, afterMs: rule.afterMs });
  }
  return out;
}

export function ruleFor(fleet: FleetConfig, caseType: string, subject: DeadlineSubject): FleetEscalationRule | undefined {
  return fleet.caseTypes[caseType]?.escalation?.[subject];
}

/** What an expired deadline does, given the rule and how often the item was escalated before. */
export function decideEscalation(subject: DeadlineSubject, rule: FleetEscalationRule | undefined, escalations: number): Escalation {
  const what = subject === 'gate' ? 'the gate was not decided' : 'the question was not answered';
  if (!rule) return { action: 'park_for_operator', reason: `${what} by its deadline and its case type declares no escalation any longer` };
  switch (rule.action) {
    case 'notify_role':
      return { action: 'notify_role', role: rule.role ?? 'operator' };
    case 'reask':
      if (escalations === 0) return { action: 'reask', extendMs: rule.afterMs };
      return { action: 'park_for_operator', reason: `${what} by its deadline, nor after it was asked again` };
    case 'park_for_operator':
      return { action: 'park_for_operator', reason: `${what} by its deadline` };
  }
}
