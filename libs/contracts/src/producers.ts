/**
 * Who may emit what (DESIGN §2, seed 004 §4): for each sender service, the message types it
 * enqueues. The broker's topic permissions (infra/rabbitmq) are derived from this table, and every
 * consumer checks an authenticated producer against it, so the two can never disagree.
 *
 * The reconciler "emits whatever it repairs": an unknown effect outcome it settles
 * (`effect.outcome`), a gate it expires (`gate.decided`) and a parked or stale task it wakes
 * (`task.runnable`) — nothing else. `operator` is a sender a human action is attributed to inside
 * intake; no process publishes as it, so it emits nothing on the broker.
 */
import type { MessageType } from './messages.js';
import type { SenderService } from './states.js';

export const PRODUCER_TYPES: Readonly<Record<SenderService, readonly MessageType[]>> = Object.freeze({
  intake: Object.freeze(['task.runnable', 'task.cancel', 'task.resume', 'question.answered', 'budget.topped_up'] as const),
  'turn-worker': Object.freeze(['task.runnable', 'task.finished', 'plan.submitted', 'gate.requested', 'question.raised', 'question.answered', 'task.dead_end'] as const),
  gate: Object.freeze(['gate.decided', 'task.runnable'] as const),
  'execution-coordinator': Object.freeze(['effect.outcome'] as const),
  reconciler: Object.freeze(['effect.outcome', 'gate.decided', 'task.runnable'] as const),
  operator: Object.freeze([] as const),
});

/** The services that hold broker credentials (every sender but `operator`). */
export const PRODUCING_SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'] as const;
export type ProducingService = (typeof PRODUCING_SERVICES)[number];

/** Whether `service` may emit `type`. Unknown services emit nothing. */
export function mayEmit(service: string, type: string): boolean {
  const types: readonly string[] | undefined = Object.hasOwn(PRODUCER_TYPES, service) ? PRODUCER_TYPES[service as SenderService] : undefined;
  return types !== undefined && types.includes(type);
}

/** The anchored routing-key pattern of the types `service` emits (a RabbitMQ topic permission). */
export function emitPattern(service: string): string {
  const types: readonly string[] = Object.hasOwn(PRODUCER_TYPES, service) ? PRODUCER_TYPES[service as SenderService] : [];
  return types.length === 0 ? '^$' : `^(${types.map((t) => t.replaceAll('.', '\\.')).join('|')})$`;
}
