/**
 * Intake's environment variables, validated by `everdict start` together with every other
 * variable of the node.
 */
import { envVar, parseString } from '@everdict/service-kit';
import type { EnvSpec } from '@everdict/service-kit';

export const INTAKE_ENV = {
  /** EVERDICT_INTAKE_SOURCES: JSON file of webhooks, mailboxes and schedules (default none; secrets are named by variable). */
  sourcesPath: envVar('EVERDICT_INTAKE_SOURCES', parseString),
} satisfies EnvSpec;
