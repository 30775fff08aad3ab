/**
 * Scheduled case types (issue 6): every replica fires every due slot, and the slot's origin key
 * `schedule:<case type>:<slot ISO>` makes exactly one of them open the case — no leader, no
 * lock, correct with any number of replicas. A replica checks from its previous check (at start:
 * `catchUpMs` back, so a slot during a brief restart still opens) through now.
 */
import { scheduleOriginKey } from '@everdict/intake-sources';
import type { NormalisedArrival } from '@everdict/intake-sources';
import { isEverdictError } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import type { Store } from '@everdict/store';
import type { Logger } from 'pino';
import { parseCron, slotsBetween } from './cron.js';
import type { CronSchedule } from './cron.js';
import { openCase } from './open.js';

export interface IntakeSchedule {
  readonly caseType: string;
  /** Five-field cron, UTC. */
  readonly cron: string;
  readonly customer: string;
  /** Title of each case (default `<case type> <slot>`). */
  readonly title?: string;
  readonly objective?: string;
}

/** The arrival of one slot: pure. */
function scheduleArrival(s: IntakeSchedule, slot: Date): NormalisedArrival {
  const iso = slot.toISOString();
  return {
    source: 'schedule',
    originKey: scheduleOriginKey(s.caseType, slot),
    customer: s.customer,
    title: `${s.title ?? s.caseType} ${iso}`,
    body: s.objective ?? '',
    receivedAt: iso,
    attachments: [],
    raw: { kind: 'schedule', caseType: s.caseType, slot: iso },
  };
}

/** Opens the case of every slot in (after, through]; returns how many this call created. */
export async function fireDueSlots(store: Store, fleet: FleetConfig, schedules: readonly { schedule: IntakeSchedule; cron: CronSchedule }[], after: Date, through: Date, onOpened?: (created: boolean) => void): Promise<number> {
  let created = 0;
  for (const { schedule, cron } of schedules) {
    for (const slot of slotsBetween(cron, after, through)) {
      const r = await openCase(store, fleet, { arrival: scheduleArrival(schedule, slot), caseType: schedule.caseType, customer: schedule.customer });
      onOpened?.(r.created);
      if (r.created) created++;
    }
  }
  return created;
}

export class Scheduler {
  private timer: NodeJS.Timeout | undefined;
  private last: Date;
  private running: Promise<void> = Promise.resolve();
  private readonly parsed: { schedule: IntakeSchedule; cron: CronSchedule }[];

  constructor(
    schedules: readonly IntakeSchedule[],
    private readonly deps: { store: Store; fleet: () => FleetConfig; logger: Logger; intervalMs?: number; catchUpMs?: number; now?: () => Date; onOpened?: (created: boolean) => void },
  ) {
    this.parsed = schedules.map((s, i) => ({ schedule: s, cron: parseCron(s.cron, `schedules[${i}].cron`) }));
    const now = (deps.now ?? (() => new Date()))();
    this.last = new Date(now.getTime() - (deps.catchUpMs ?? 5 * 60_000));
  }

  start(): void {
    const tick = () => {
      this.running = this.tick().finally(() => {
        if (this.timer !== undefined) this.timer = setTimeout(tick, this.deps.intervalMs ?? 15_000);
      });
    };
    this.timer = setTimeout(tick, 0);
  }

  private async tick(): Promise<void> {
    const through = (this.deps.now ?? (() => new Date()))();
    try {
      const created = await fireDueSlots(this.deps.store, this.deps.fleet(), this.parsed, this.last, through, this.deps.onOpened);
      if (created > 0) this.deps.logger.info({ created }, 'scheduled cases opened');
      this.last = through;
    } catch (err) {
      // `last` stays: the next tick retries the same slots (their origin keys keep it idempotent).
      // Under a fleet soft stop that is the intent: the slots are deferred until the resume.
      if (isEverdictError(err, 'fleet_stopped')) this.deps.logger.info({}, 'scheduled case slots deferred: the fleet is under a soft stop');
      else this.deps.logger.error({ err: (err as Error).message }, 'scheduled case slots failed; retrying next tick');
    }
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
