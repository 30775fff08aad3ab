/**
 * A REAL fleet node for the console tests: `everdict start --service intake --service gate`
 * (libs/testkit's startEverdictNode, the one composition root) on a database and broker prefix
 * of the test file's own, with the intake tests' fleet (helpers.ts: its principals and tokens), plus
 * a client pool on the same database for assertions.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPgDb } from '@everdict/store';
import type { Db } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, freePort, freshDatabase, startEverdictNode } from '@everdict/testkit';
import { TOKENS, call, deletePrefixTopology, fleetConfig } from './helpers.js';

export interface ConsoleNode {
  readonly url: string;
  readonly db: Db;
  readonly prefix: string;
  output(): string;
  stop(): Promise<void>;
}

export async function startConsoleNode(label: string): Promise<ConsoleNode> {
  const database = await freshDatabase(label);
  const prefix = amqpPrefix(label);
  const db = createPgDb(database.url, { max: 4 });
  const dir = mkdtempSync(join(tmpdir(), 'everdict-console-'));
  writeFileSync(join(dir, 'fleet.json'), JSON.stringify(fleetConfig()));
  const node = await startEverdictNode({
    services: ['intake', 'gate'],
    port: await freePort(),
    env: { DATABASE_URL: database.url, AMQP_URL: TEST_AMQP_URL, EVERDICT_CONFIG: join(dir, 'fleet.json'), EVERDICT_AMQP_PREFIX: prefix },
  });
  let stopped: Promise<void> | undefined;
  return {
    url: node.url,
    db,
    prefix,
    output: node.output,
    stop() {
      stopped ??= (async () => {
        await node.stop();
        await db.close();
        await deletePrefixTopology(prefix);
        await database.drop();
      })();
      return stopped;
    },
  };
}

/** Opens a case for acme through the API; returns its id. */
export async function openAcmeCase(url: string, key: string): Promise<string> {
  const r = await call(url, 'POST', '/v1/cases', { token: TOKENS.acme, body: { caseType: 'support', title: `console ${key}`, originKey: key } });
  if (r.status !== 201) throw new Error(`open case: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body['caseId'] as string;
}
