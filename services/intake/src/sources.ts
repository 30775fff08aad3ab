/**
 * The intake sources file (env EVERDICT_INTAKE_SOURCES): webhook sources and mailboxes. It
 * lives beside the fleet config, not in it, and carries NO secrets: each names the environment
 * variables holding its webhook secrets or mailbox password, resolved at load.
 *
 *   { "webhooks": [{ "name": "github", "caseType": "support", "secretsEnv": ["GH_SECRET"],
 *                    "signature": {"kind": "github"}, "mapping": {"kind": "github-issues"},
 *                    "customer": "acme" }],
 *     "mailboxes": [{ "account": "support@example.com", "host": "imap.example.com", "port": 993,
 *                     "user": "support", "passwordEnv": "SUPPORT_IMAP_PASSWORD",
 *                     "mailbox": "INBOX", "caseType": "support", "customer": "acme" }],
 *     "schedules": [{ "caseType": "audit", "cron": "0 6 * * 1", "customer": "acme", "title": "Weekly audit" }] }
 */
import { readFileSync } from 'node:fs';
import { EverdictError } from '@everdict/contracts';
import type { WebhookSourceConfig } from '@everdict/intake-sources';
import { secretFromEnv } from '@everdict/service-kit';
import type { IntakeMailbox } from './mailboxes.js';
import type { IntakeSchedule } from './scheduler.js';

export interface IntakeWebhookSource extends WebhookSourceConfig {
  readonly caseType: string;
  /** Where the answer to a case this source opened is POSTed as a ticket comment (channels.ts); absent: stored in the case view. */
  readonly replyUrl?: string;
}

export interface IntakeSources {
  readonly webhooks: IntakeWebhookSource[];
  readonly mailboxes: IntakeMailbox[];
  /** Scheduled case types: one case per cron slot (UTC), whatever the number of replicas. */
  readonly schedules?: IntakeSchedule[];
}

const ENV_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;

function fail(path: string, message: string): never {
  throw new EverdictError('config_invalid', `intake sources: ${path} ${message}`, { details: { field: path } });
}

function envSecret(env: Readonly<Record<string, string | undefined>>, name: unknown, path: string): string {
  if (typeof name !== 'string' || !ENV_NAME.test(name)) fail(path, 'must name an environment variable');
  // X_FILE counts as X (service-kit secretFiles.ts): webhook secrets and mailbox passwords too.
  const r = secretFromEnv(env, name);
  if (r.problem) fail(path, `names ${name}: ${r.problem.name} ${r.problem.reason}`);
  if (r.value === undefined) fail(path, `names ${name}, which is not set`);
  return r.value;
}

export function parseIntakeSources(doc: unknown, env: Readonly<Record<string, string | undefined>>): IntakeSources {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) fail('(root)', 'must be an object');
  const d = doc as Record<string, unknown>;
  const webhooks = (d['webhooks'] ?? []) as unknown[];
  const mailboxes = (d['mailboxes'] ?? []) as unknown[];
  if (!Array.isArray(webhooks)) fail('webhooks', 'must be an array');
  if (!Array.isArray(mailboxes)) fail('mailboxes', 'must be an array');
  const schedules = (d['schedules'] ?? []) as unknown[];
  if (!Array.isArray(schedules)) fail('schedules', 'must be an array');
  return {
    webhooks: webhooks.map((w, i) => {
      const o = w as Record<string, unknown>;
      const { secretsEnv, caseType, ...rest } = o;
      if (typeof caseType !== 'string') fail(`webhooks[${i}].caseType`, 'is required');
      if (!Array.isArray(secretsEnv) || secretsEnv.length === 0) fail(`webhooks[${i}].secretsEnv`, 'must list at least one environment variable');
      const secrets = secretsEnv.map((n, j) => envSecret(env, n, `webhooks[${i}].secretsEnv[${j}]`));
      return { ...(rest as unknown as WebhookSourceConfig), caseType, secrets };
    }),
    mailboxes: mailboxes.map((m, i) => {
      const o = m as Record<string, unknown>;
      const { passwordEnv, ...rest } = o;
      for (const f of ['account', 'host', 'user', 'caseType']) if (typeof o[f] !== 'string' || (o[f] as string).length === 0) fail(`mailboxes[${i}].${f}`, 'is required');
      if (typeof o['port'] !== 'number') fail(`mailboxes[${i}].port`, 'must be a port number');
      return { ...(rest as unknown as Omit<IntakeMailbox, 'pass'>), pass: envSecret(env, passwordEnv, `mailboxes[${i}].passwordEnv`) };
    }),
    schedules: schedules.map((x, i) => {
      const o = x as Record<string, unknown>;
      for (const f of ['caseType', 'cron', 'customer']) if (typeof o[f] !== 'string' || (o[f] as string).length === 0) fail(`schedules[${i}].${f}`, 'is required');
      return o as unknown as IntakeSchedule;
    }),
  };
}

export function loadIntakeSources(path: string, env: Readonly<Record<string, string | undefined>> = process.env): IntakeSources {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new EverdictError('config_invalid', `intake sources: ${path} is not a readable JSON file`, { cause: err, details: { field: 'EVERDICT_INTAKE_SOURCES' } });
  }
  return parseIntakeSources(doc, env);
}
