/**
 * `everdict migrate [--grant-to ROLE]`: apply pending migrations under the advisory lock, as the
 * schema owner — MIGRATE_DATABASE_URL when set (compose's one-shot service), else DATABASE_URL.
 * With `--grant-to`, then grant the services' role its row privileges (store `grantAppRole`),
 * creating it or rotating its password from EVERDICT_APP_DB_PASSWORD when that is set.
 * Every variable may come from a file (X_FILE).
 */
import { ConfigError, SECRET_VARIABLES, resolveSecretFiles } from '@everdict/service-kit';
import type { ConfigProblem } from '@everdict/service-kit';
import { createPgDb, grantAppRole, migrate } from '@everdict/store';
import { emit } from './output.js';

type Env = Readonly<Record<string, string | undefined>>;

export interface MigrateInputs {
  readonly databaseUrl: string;
  readonly grantTo: string | undefined;
  readonly appPassword: string | undefined;
}

const set = (v: string | undefined): v is string => (v?.trim() ?? '') !== '';

/** The URL and password to use, or a ConfigError naming every problem. */
export function migrateInputs(rawEnv: Env, grantTo: string | undefined): MigrateInputs {
  const problems: ConfigProblem[] = [];
  const env = resolveSecretFiles(rawEnv, SECRET_VARIABLES, problems);
  const url = set(env['MIGRATE_DATABASE_URL']) ? env['MIGRATE_DATABASE_URL'] : env['DATABASE_URL'];
  if (!set(url) && !problems.some((p) => p.name.includes('DATABASE_URL'))) {
    problems.push({ name: 'MIGRATE_DATABASE_URL', reason: 'or DATABASE_URL is required: the schema owner\'s postgres:// URL' });
  }
  const password = env['EVERDICT_APP_DB_PASSWORD'];
  if (set(password) && grantTo === undefined) problems.push({ name: 'EVERDICT_APP_DB_PASSWORD', reason: 'is set but --grant-to names no role to give it to' });
  if (problems.length > 0) throw new ConfigError(problems);
  return { databaseUrl: url!.trim(), grantTo, appPassword: set(password) ? password.trim() : undefined };
}

export async function runMigrate(opts: { env: Env; grantTo: string | undefined; json: boolean }): Promise<void> {
  const inputs = migrateInputs(opts.env, opts.grantTo);
  const db = createPgDb(inputs.databaseUrl, { max: 1, applicationName: 'everdict-migrate' });
  try {
    const result = await migrate(db);
    const granted = inputs.grantTo === undefined ? undefined : { role: inputs.grantTo, ...(await grantAppRole(db, inputs.grantTo, inputs.appPassword === undefined ? {} : { password: inputs.appPassword })) };
    emit(opts.json, { ...result, ...(granted ? { granted } : {}) }, () => {
      const schema = result.applied.length ? `applied ${result.applied.join(', ')}; schema at ${result.current}` : `schema up to date at ${result.current}`;
      return granted ? `${schema}; row privileges granted to ${granted.role}${granted.created ? ' (role created)' : ''}` : schema;
    });
  } finally {
    await db.close();
  }
}
