/**
 * `startIntake`: the intake service composed onto a process by `everdict start` (alone, or on a node
 * running several services): the case API and ticket webhooks on the process's HTTP port, and
 * the mailbox monitors (one per mailbox across all replicas). Stateless: every fact lives in
 * Postgres, so N intakes can run side by side; origin keys make every arrival open one case.
 */
import { EverdictError } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import type { Substrate } from '@everdict/host';
import { PrincipalDirectory } from '@everdict/http-api';
import { DEFAULT_WEBHOOK_MAX_BODY_BYTES, createWebhookHandler } from '@everdict/intake-sources';
import type { ArrivalSink, MailboxMonitorOptions } from '@everdict/intake-sources';
import type { ServiceContext } from '@everdict/service-kit';
import { loadFleetStops, pruneWebSessions, webSessionLookup } from '@everdict/store';
import { intakeApi } from './api.js';
import { CustomerChannels } from './channels.js';
import { MailboxSupervisor } from './mailboxes.js';
import { intakeMetrics } from './metrics.js';
import { caseSink } from './open.js';
import { queueDepthProbe } from './queues.js';
import { DeadLetterBroker } from './exceptions.js';
import { LedgerFeed } from './ledgerStream.js';
import { consoleUi } from './ui.js';
import { Scheduler } from './scheduler.js';
import type { IntakeSources } from './sources.js';

export interface IntakeOptions {
  /** Webhook sources and mailboxes (see sources.ts). Default: none. */
  readonly sources?: IntakeSources;
  /** Needed for mailboxes: each advisory lock holds a session of its own. */
  readonly databaseUrl?: string;
  /** Enables queue depths in `GET /v1/fleet` (passive declares on the substrate's topology). */
  readonly amqpUrl?: string;
  /** Largest JSON body of the API in bytes (default 256 KiB). */
  readonly maxBodyBytes?: number;
  /** Replicas without a mailbox's lock retry this often (default 5000 ms). */
  readonly mailboxLockRetryMs?: number;
  readonly mailboxMonitorOptions?: Partial<MailboxMonitorOptions>;
  /** How often due schedule slots are checked (default 15000 ms). */
  readonly scheduleIntervalMs?: number;
  /** How often cases waiting to tell their customer are looked for (default 2000 ms). */
  readonly channelIntervalMs?: number;
}

export interface RunningIntake {
  /** Swaps the fleet config (principals, case types) for everything that follows. */
  replaceFleet(fleet: FleetConfig): void;
  /** Mailbox keys this replica monitors right now. */
  mailboxesHeld(): string[];
}

export async function startIntake(ctx: ServiceContext, substrate: Substrate, fleet: FleetConfig, opts: IntakeOptions = {}): Promise<RunningIntake> {
  let current = fleet;
  let principals = new PrincipalDirectory(fleet.principals);
  const metrics = intakeMetrics(ctx.metrics, { fleetStops: () => loadFleetStops(substrate.store.db) });
  const sources = opts.sources ?? { webhooks: [], mailboxes: [] };

  // Every case type a source names must exist now, not at the first arrival.
  const named = [
    ...sources.webhooks.map((w, i) => ({ field: `webhooks[${i}].caseType`, caseType: w.caseType })),
    ...sources.mailboxes.map((m, i) => ({ field: `mailboxes[${i}].caseType`, caseType: m.caseType })),
    ...(sources.schedules ?? []).map((x, i) => ({ field: `schedules[${i}].caseType`, caseType: x.caseType })),
  ];
  for (const n of named) {
    if (!fleet.caseTypes[n.caseType]) throw new EverdictError('config_invalid', `intake sources: ${n.field} ${n.caseType} is not in the fleet config`, { details: { field: n.field } });
  }

  const sinkFor = (caseType: string, customer: string | undefined): ArrivalSink =>
    caseSink({ store: substrate.store, fleet: () => current, caseType, ...(customer !== undefined ? { customer } : {}), onOpened: (source, created) => metrics.opened(source, created) });

  // One handler for all sources; each delivery is routed to its own source's case type.
  const perSource = new Map(sources.webhooks.map((w) => [w.name, sinkFor(w.caseType, w.customer)]));
  const webhooks =
    sources.webhooks.length === 0
      ? undefined
      : createWebhookHandler({
          sources: sources.webhooks,
          sink: {
            open: (arrival) => {
              const source = arrival.raw.kind === 'webhook' ? arrival.raw.source : '';
              const sink = perSource.get(source);
              if (!sink) throw new EverdictError('invalid_arrival', `webhook source ${source} has no sink`, { details: { field: 'source' } });
              return sink.open(arrival);
            },
          },
        });

  const probe = opts.amqpUrl ? queueDepthProbe(opts.amqpUrl, substrate.transport.topology) : undefined;
  if (probe) ctx.onShutdown('queue depth probe', () => probe.close());

  // The operator console (issue 14): live ledger streams wake on one feed per process watching
  // the heads of the cases they follow. Dead letters are read from the broker's .dead queues.
  const ledgerFeed = new LedgerFeed();
  ledgerFeed.start(substrate.store);
  ctx.onShutdown('ledger feed', () => ledgerFeed.stop());
  const deadLetters = opts.amqpUrl ? new DeadLetterBroker(opts.amqpUrl, substrate.transport.topology) : undefined;
  if (deadLetters) ctx.onShutdown('dead-letter broker', () => deadLetters.close());
  const pruning = setInterval(() => void pruneWebSessions(substrate.store.db).catch(() => undefined), 3_600_000);
  pruning.unref();
  ctx.onShutdown('web session pruning', () => clearInterval(pruning));

  const limits = new Map(sources.webhooks.map((w) => [w.name, w.maxBodyBytes ?? DEFAULT_WEBHOOK_MAX_BODY_BYTES]));
  ctx.addRoutes(
    intakeApi({
      store: substrate.store,
      fleet: () => current,
      principals: () => principals,
      metrics,
      webhooks,
      webhookBodyLimit: (name) => limits.get(name),
      queueDepths: probe?.depths,
      ...(opts.maxBodyBytes ? { maxBodyBytes: opts.maxBodyBytes } : {}),
      webSessions: webSessionLookup(substrate.store.db),
      ledgerFeed,
      signal: ctx.signal,
      deadLetters,
    }),
  );
  ctx.addRoutes(consoleUi());

  let supervisor: MailboxSupervisor | undefined;
  if (sources.mailboxes.length > 0) {
    if (!opts.databaseUrl) throw new EverdictError('config_invalid', 'intake: mailboxes need databaseUrl (one advisory-lock session per mailbox)', { details: { field: 'databaseUrl' } });
    supervisor = new MailboxSupervisor(sources.mailboxes, {
      databaseUrl: opts.databaseUrl,
      db: substrate.store.db,
      sinkFor: (m) => sinkFor(m.caseType, m.customer),
      logger: ctx.logger,
      ...(opts.mailboxLockRetryMs ? { lockRetryMs: opts.mailboxLockRetryMs } : {}),
      ...(opts.mailboxMonitorOptions ? { monitorOptions: opts.mailboxMonitorOptions } : {}),
    });
    supervisor.start();
    ctx.onShutdown('mailbox monitors', () => supervisor!.stop());
  }
  // Every replica delivers answers to cases waiting to tell their customer (one per case at a time).
  const channels = new CustomerChannels({ store: substrate.store, mailboxes: sources.mailboxes, webhooks: sources.webhooks, logger: ctx.logger, ...(opts.channelIntervalMs ? { intervalMs: opts.channelIntervalMs } : {}) });
  channels.start();
  ctx.onShutdown('customer channels', () => channels.stop());
  if (sources.schedules?.length) {
    const scheduler = new Scheduler(sources.schedules, {
      store: substrate.store,
      fleet: () => current,
      logger: ctx.logger,
      onOpened: (created) => metrics.opened('schedule', created),
      ...(opts.scheduleIntervalMs ? { intervalMs: opts.scheduleIntervalMs } : {}),
    });
    scheduler.start();
    ctx.onShutdown('scheduler', () => scheduler.stop());
  }
  ctx.logger.info({ principals: Object.keys(fleet.principals ?? {}).length, caseTypes: Object.keys(fleet.caseTypes).length, webhooks: sources.webhooks.length, mailboxes: sources.mailboxes.length, schedules: sources.schedules?.length ?? 0 }, 'intake started');
  return {
    replaceFleet(next) {
      current = next;
      principals = new PrincipalDirectory(next.principals);
    },
    mailboxesHeld: () => supervisor?.held() ?? [],
  };
}
