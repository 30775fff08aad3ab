/**
 * Embedded mode of `everdict start` (DESIGN §7): neither DATABASE_URL nor AMQP_URL set → every
 * service in this one process, on a file-backed PGlite database and the in-process transport,
 * with the sample fleet config and the demo notebook unless told otherwise.
 *
 *   EVERDICT_DATA_DIR      database folder (default `.data/everdict` under the working directory)
 *   EVERDICT_CONFIG        fleet config (default the sample `infra/config/fleet.json`)
 *   EVERDICT_DEMO_NOTES_URL  base URL of the demo notebook (default: the notebook this node
 *                          serves under /demo/notes, whenever the config's connectors name it)
 *
 * Exactly one of the two URLs set is a configuration error naming the other: half a fleet would
 * silently split state between an embedded database and a real broker (or the reverse).
 */
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, parsePort } from '@everdict/service-kit';

type Env = Readonly<Record<string, string | undefined>>;

const DEFAULT_DATA_DIR = '.data/everdict';
/** Demo-only bearer tokens of the sample config's principals (their sha256 is in fleet.json). */
const DEMO_TOKENS = { requester: 'everdict-demo-requester', approver: 'everdict-demo-approver' } as const;

const set = (v: string | undefined): boolean => (v?.trim() ?? '') !== '';

/**
 * Which kind of node the environment asks for. Both URLs → fleet; neither → embedded; one →
 * ConfigError naming the missing one.
 */
export function nodeMode(env: Env): 'fleet' | 'embedded' {
  // X_FILE counts as X: either form of the secret asks for a fleet node.
  const db = set(env['DATABASE_URL']) || set(env['DATABASE_URL_FILE']);
  const amqp = set(env['AMQP_URL']) || set(env['AMQP_URL_FILE']);
  if (db && amqp) return 'fleet';
  if (!db && !amqp) return 'embedded';
  const [missing, present] = db ? ['AMQP_URL', 'DATABASE_URL'] : ['DATABASE_URL', 'AMQP_URL'];
  throw new ConfigError([{ name: missing, reason: `is required because ${present} is set (set both for a fleet node, neither for the embedded single-process mode)` }]);
}

/** The folder holding `infra/config/fleet.json`, searched upward from this module (src or dist). */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'infra', 'config', 'fleet.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new ConfigError([{ name: 'EVERDICT_CONFIG', reason: 'is required: the sample infra/config/fleet.json was not found next to this installation' }]);
    dir = up;
  }
}

export interface EmbeddedSettings {
  readonly dataDir: string;
  readonly configPath: string;
  /** True when the sample config is used (the demo principals and case type exist). */
  readonly sampleConfig: boolean;
}

/** Defaults for what is unset: the data folder, the sample config. */
export function embeddedSettings(o: { dataDir?: string | undefined; configPath?: string | undefined }): EmbeddedSettings {
  const { configPath } = o;
  return {
    dataDir: resolve(o.dataDir ?? DEFAULT_DATA_DIR),
    configPath: configPath ?? join(repoRoot(), 'infra', 'config', 'fleet.json'),
    sampleConfig: configPath === undefined,
  };
}

/**
 * The port embedded mode binds: PORT (default 8080), or a free one for PORT=0 — chosen up front
 * because the demo connector must know the address of the notebook this node serves. An invalid
 * PORT is left for the environment check to report.
 */
export async function embeddedPort(env: Env): Promise<number | undefined> {
  const raw = env['PORT']?.trim() ?? '';
  let port: number;
  try {
    port = raw === '' ? 8080 : parsePort(raw);
  } catch {
    return undefined;
  }
  if (port !== 0) return port;
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, r));
  const free = (srv.address() as AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return free;
}

/** What `npm start` prints once the embedded node is ready: plain text for a person. */
export function embeddedBanner(o: { port: number; settings: EmbeddedSettings; services: readonly string[] }): string {
  const url = `http://127.0.0.1:${o.port}`;
  const lines = [
    '',
    `Everdict is running embedded: ${o.services.join(', ')} in this one process.`,
    `  database   PGlite in ${o.settings.dataDir} (EVERDICT_DATA_DIR)`,
    `  transport  in-process (set DATABASE_URL and AMQP_URL for a fleet node)`,
    `  config     ${o.settings.configPath}`,
    `  API        ${url}   (also /metrics /livez /readyz)`,
  ];
  if (o.settings.sampleConfig) {
    lines.push(
      '',
      'Open a demo case (the tokens below are demo-only, from infra/config/fleet.json):',
      '',
      `  curl -s -X POST ${url}/v1/cases \\`,
      `    -H 'Authorization: Bearer ${DEMO_TOKENS.requester}' -H 'Content-Type: application/json' \\`,
      `    -d '{"caseType":"demo","title":"Status update, please"}'`,
      '',
      'Its agent reads the demo notebook, then proposes one note to it; an auditor reviews it and a gate waits for you.',
      'List the open gates and decide one (the digest binds your verdict to the exact packet):',
      '',
      `  export EVERDICT_URL=${url} EVERDICT_TOKEN=${DEMO_TOKENS.approver}`,
      '  node bin/everdict.js gates',
      '  node bin/everdict.js decide <gateId> --decision publish-note --verdict approve --digest <digest>',
      '',
      `  (or: curl -s '${url}/v1/gates?state=open' -H 'Authorization: Bearer ${DEMO_TOKENS.approver}'`,
      `       curl -s -X POST ${url}/v1/gates/<gateId>/decisions -H 'Authorization: Bearer ${DEMO_TOKENS.approver}' \\`,
      `         -H 'Content-Type: application/json' -d '{"decision":"publish-note","verdict":"approve","digest":"<digest>"}')`,
      '',
      `Then follow the case: EVERDICT_TOKEN=${DEMO_TOKENS.requester} node bin/everdict.js case <caseId>`,
      `and see the note: curl -s ${url}/demo/notes/notes`,
    );
  }
  lines.push('', 'Ctrl-C drains and stops; the data stays in the data folder for the next start.', '');
  return lines.join('\n');
}
