/**
 * `everdict` entry point. Exit codes: 0 ok, 1 the command failed, 2 usage or configuration error.
 */
import { readFileSync } from 'node:fs';
import { isEverdictError } from '@everdict/contracts';
import { ConfigError } from '@everdict/service-kit';
import { UsageError, parseInvocation } from './args.js';
import { runMigrate } from './migrate.js';
import { OPS_HELP, isOpsCommand, runOps } from './ops/index.js';
import { runStart } from './start.js';

const HELP = `everdict — durable runtime for LLM agents

usage: everdict <command> [--json]

commands:
  start [--service NAME]…
              run a fleet node: migrations, topology, outbox relay, /metrics /livez /readyz on PORT;
              with neither DATABASE_URL nor AMQP_URL: all five services in this process on
              embedded PGlite (EVERDICT_DATA_DIR) and the in-process transport, sample config
  migrate [--grant-to ROLE]
              apply database migrations as the schema owner (MIGRATE_DATABASE_URL, else
              DATABASE_URL); --grant-to: give the services' ROLE row privileges only
${OPS_HELP}
  help        this text
  --version   the CLI's version

environment: DATABASE_URL, AMQP_URL (each secret also as X_FILE), EVERDICT_CONFIG, EVERDICT_DATA_DIR, PORT, LOG_LEVEL; EVERDICT_URL, EVERDICT_GATE_URL, EVERDICT_TOKEN`;

/** The version of this CLI as its package declares it (dist/main.js and src/main.ts sit one level below it). */
function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : 'unknown';
}

async function main(argv: readonly string[]): Promise<number> {
  // Operator commands have flags of their own (--decision, --mode, …); they parse their argv.
  const [word, ...rest] = argv;
  if (word === '--version' || word === 'version') {
    process.stdout.write(`everdict ${cliVersion()}\n`);
    return 0;
  }
  if (isOpsCommand(word)) return runOps(word, rest);
  const inv = parseInvocation(argv);
  switch (inv.command) {
    case 'help':
      process.stdout.write(`${HELP}\n`);
      return 0;
    case 'start':
      await runStart(inv.services);
      return 0;
    case 'migrate':
      await runMigrate({ env: process.env, grantTo: inv.grantTo, json: inv.json });
      return 0;
    default:
      throw new UsageError(`unknown command "${inv.command}"; see everdict help`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`everdict: ${err.message}\n`);
      process.exitCode = 2;
    } else if (err instanceof ConfigError) {
      // One problem a line, each naming its variable (and JSON path): the whole fix in one read.
      process.stderr.write(`everdict: ${err.code}: invalid configuration (${err.fields.length === 1 ? '1 problem' : `${err.fields.length} problems`}):\n${err.fields.map((f) => `  ${f.name}: ${f.reason}\n`).join('')}`);
      process.exitCode = 2;
    } else if (isEverdictError(err)) {
      process.stderr.write(`everdict: ${err.code}: ${err.message}\n`);
      process.exitCode = err.code === 'config_invalid' ? 2 : 1;
    } else {
      process.stderr.write(`everdict: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    }
  },
);
