/**
 * The Postgres estate connector against a REAL target database (its own fresh database). Faults
 * are real: a TCP proxy between connector and server cuts the connection at a chosen statement.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EffectCheck } from '@everdict/contracts';
import { sealPacket } from '@everdict/contracts';
import type { PostgresEstateConfig } from '@everdict/connectors';
import { ConnectorRefused, PostgresEstateConnector, estatePool, mayRetryAutomatically } from '@everdict/connectors';
import { freshDatabase } from '@everdict/testkit';
import { CALL_ID, ctx, packetFor } from './fixtures.js';
import { countingPool } from './countingPool.js';
import type { CountedPool } from './countingPool.js';

const config: PostgresEstateConfig = {
  name: 'ledgerdb',
  target: { system: 'ledger', environment: 'test' },
  lockTimeoutMs: 300,
  templates: [
    {
      name: 'accounts.credit',
      kind: 'mutate',
      effectClass: 'dml',
      sql: 'UPDATE accounts SET balance = balance + :amount WHERE id = :id RETURNING id, balance',
      params: { id: { type: 'string', maxLength: 32 }, amount: { type: 'integer', minimum: 1, maximum: 1_000_000 } },
      expectedRows: 1,
    },
    {
      name: 'accounts.credit_region',
      kind: 'mutate',
      effectClass: 'dml',
      sql: 'UPDATE accounts SET balance = balance + :amount WHERE region = :region',
      params: { region: { type: 'string', enum: ['eu', 'us'] }, amount: { type: 'integer', minimum: 1 } },
    },
    {
      name: 'accounts.debit',
      kind: 'mutate',
      effectClass: 'dml',
      sql: 'UPDATE accounts SET balance = balance - :amount WHERE id = :id',
      params: { id: { type: 'string', maxLength: 32 }, amount: { type: 'integer', minimum: 1 } },
      expectedRows: 1,
    },
    {
      name: 'accounts.get',
      kind: 'read',
      sql: 'SELECT id, balance, region FROM accounts WHERE id = :id',
      params: { id: { type: 'string', maxLength: 32 } },
    },
  ],
};

type Db = Awaited<ReturnType<typeof freshDatabase>>;
let db: Db;
let admin: pg.Client;
let counted: CountedPool;
let connector: PostgresEstateConnector;
const proxies: CuttingProxy[] = [];
const others: PostgresEstateConnector[] = [];


/**
 * A TCP proxy to the real server. When armed, the first client chunk containing `marker` is
 * either forwarded and the client cut before any answer returns (`forward_then_cut`: the server
 * executes it), or dropped with both sides closed (`cut_before`: the server never sees it).
 */
class CuttingProxy {
  private readonly server: net.Server;
  armed: { marker: string; mode: 'forward_then_cut' | 'cut_before' } | undefined;
  port = 0;

  constructor(private readonly upstreamPort: number) {
    this.server = net.createServer((client) => this.connection(client));
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private connection(client: net.Socket): void {
    const upstream = net.connect(this.upstreamPort, '127.0.0.1');
    let cut = false;
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    upstream.on('data', (chunk) => {
      if (cut) upstream.destroy(); // the server answered into the void; the commit is done
      else client.write(chunk);
    });
    upstream.on('close', () => client.destroy());
    client.on('close', () => {
      if (!cut) upstream.destroy();
    });
    client.on('data', (chunk) => {
      const armed = this.armed;
      if (armed !== undefined && chunk.includes(armed.marker)) {
        this.armed = undefined;
        cut = true;
        if (armed.mode === 'forward_then_cut') upstream.write(chunk);
        else upstream.destroy();
        client.destroy();
        return;
      }
      upstream.write(chunk);
    });
  }
}

async function balance(id: string): Promise<number> {
  const res = await admin.query<{ balance: string }>('SELECT balance FROM accounts WHERE id = $1', [id]);
  return Number(res.rows[0]?.balance);
}

async function receiptRows(key: string): Promise<{ outcome: string; rows: number | null }[]> {
  return (await admin.query<{ outcome: string; rows: number | null }>('SELECT outcome, rows FROM everdict_receipts WHERE idempotency_key = $1', [key])).rows;
}

const credit = (id: string, amount: number, extra: { preconditions?: EffectCheck[] } = {}) =>
  sealPacket(packetFor({ connector: 'ledgerdb', system: 'ledger', operation: 'accounts.credit', params: { id, amount }, ...extra }));

async function viaProxy(): Promise<{ proxy: CuttingProxy; connector: PostgresEstateConnector }> {
  const upstream = new URL(db.url);
  const proxy = new CuttingProxy(Number(upstream.port || 5432));
  await proxy.start();
  proxies.push(proxy);
  const url = new URL(db.url);
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  const c = new PostgresEstateConnector(config, estatePool(url.toString(), { max: 2 }));
  others.push(c);
  return { proxy, connector: c };
}

beforeAll(async () => {
  db = await freshDatabase('connectors_pg');
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  await admin.query(`CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0), region text NOT NULL)`);
  await admin.query(`INSERT INTO accounts (id, balance, region) VALUES ('a1', 100, 'eu'), ('a2', 0, 'eu'), ('a3', 0, 'us'), ('a4', 0, 'us'), ('a5', 0, 'us'), ('a6', 0, 'us'), ('a7', 10, 'us')`);
  counted = countingPool(estatePool(db.url, { max: 3 }));
  connector = new PostgresEstateConnector(config, counted.port);
  await connector.installReceipts();
});

afterAll(async () => {
  for (const c of others) await c.close();
  for (const p of proxies) await p.stop();
  await connector?.close();
  await admin?.end();
});

describe('Postgres estate connector against a real target database', () => {
  it('executes a template atomically with its receipt, and a second execute with the same key returns that receipt', async () => {
    const packet = credit('a1', 50);
    const call = { callId: CALL_ID, idempotencyKey: 'pg-key-1' };
    const first = await connector.execute(packet, call, ctx);
    expect(first).toMatchObject({
      outcome: 'applied',
      established: 'committed in one target transaction with its receipt',
      receipt: { idempotencyKey: 'pg-key-1', operation: 'accounts.credit', rows: 1, returned: [{ id: 'a1', balance: '150' }], packetDigest: packet.digest },
    });
    expect(await balance('a1')).toBe(150);
    expect(await receiptRows('pg-key-1')).toEqual([{ outcome: 'applied', rows: 1 }]);

    const second = await connector.execute(packet, call, ctx);
    expect(second.outcome).toBe('applied');
    expect(second.established).toMatch(/earlier execution .* nothing ran again/);
    expect(second.receipt).toEqual(first.receipt);
    expect(await balance('a1')).toBe(150); // applied once

    expect(await connector.whatLanded(packet, call, ctx)).toMatchObject({ outcome: 'applied', receipt: first.receipt });
  });

  it('rolls back and reports not_applied when the row count differs from the expected count', async () => {
    const packet = sealPacket(
      packetFor({ connector: 'ledgerdb', system: 'ledger', operation: 'accounts.credit_region', params: { region: 'us', amount: 5 }, expectedCounts: { rows: 1 } }),
    );
    const report = await connector.execute(packet, { callId: CALL_ID, idempotencyKey: 'pg-key-count' }, ctx);
    expect(report).toMatchObject({ outcome: 'not_applied', reason: 'row_count_mismatch' });
    expect(report.established).toMatch(/affected 5 rows where 1 were expected/);
    expect(await balance('a3')).toBe(0);
    expect(await receiptRows('pg-key-count')).toEqual([]); // the receipt rolled back with the mutation
    expect(mayRetryAutomatically(connector.describe(), report.outcome)).toBe(true);
  });

  it('reports a statement the target refuses as not_applied with its SQLSTATE', async () => {
    const debit = sealPacket(packetFor({ connector: 'ledgerdb', system: 'ledger', operation: 'accounts.debit', params: { id: 'a2', amount: 1 } }));
    const report = await connector.execute(debit, { callId: CALL_ID, idempotencyKey: 'pg-key-check' }, ctx);
    expect(report).toMatchObject({ outcome: 'not_applied', reason: 'sqlstate_23514' });
    expect(await receiptRows('pg-key-check')).toEqual([]);
  });

  it('refuses undeclared templates, free SQL and mismatched packets before contact', async () => {
    const connects = counted.connects();
    const queries = counted.queries();
    const before = (await admin.query('SELECT id, balance FROM accounts ORDER BY id')).rows;
    const base = credit('a2', 1);
    const refused: [() => Promise<unknown>, string][] = [
      [() => connector.read('SELECT * FROM accounts', {}, ctx), 'unregistered_operation'],
      [() => connector.read('accounts.credit', { id: 'a2', amount: 1 }, ctx), 'not_a_read'],
      [() => connector.read('accounts.get', { id: 'a2', extra: 'x' }, ctx), 'invalid_params'],
      [() => connector.execute(sealPacket({ ...base, operation: { connector: 'ledgerdb', name: 'accounts.drop' } }), { callId: CALL_ID, idempotencyKey: 'r1' }, ctx), 'unregistered_operation'],
      [() => connector.execute(sealPacket({ ...base, operation: { connector: 'ledgerdb', name: 'accounts.get' } }), { callId: CALL_ID, idempotencyKey: 'r2' }, ctx), 'not_a_mutation'],
      [() => connector.execute(sealPacket({ ...base, target: { ...base.target, system: 'other' } }), { callId: CALL_ID, idempotencyKey: 'r3' }, ctx), 'target_mismatch'],
      [() => connector.execute(sealPacket({ ...base, params: { id: 'a2', amount: 0 } }), { callId: CALL_ID, idempotencyKey: 'r4' }, ctx), 'invalid_params'],
      [() => connector.execute(sealPacket({ ...base, expectedCounts: { rows: 2 } }), { callId: CALL_ID, idempotencyKey: 'r5' }, ctx), 'expected_count_mismatch'],
      [
        () =>
          connector.execute(
          sealPacket(packetFor({ connector: 'ledgerdb', system: 'ledger', operation: 'accounts.credit_region', params: { region: 'eu', amount: 1 } })),
          { callId: CALL_ID, idempotencyKey: 'r6' },
          ctx,
        ),
        'missing_expected_count',
      ],
      [() => connector.whatLanded(sealPacket({ ...base, target: { ...base.target, environment: 'prod' } }), { callId: CALL_ID, idempotencyKey: 'r7' }, ctx), 'target_mismatch'],
    ];
    for (const [attempt, reason] of refused) {
      const err = await attempt().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, reason).toBeInstanceOf(ConnectorRefused);
      expect(err).toMatchObject({ reason });
    }
    expect(counted.connects()).toBe(connects);
    expect(counted.queries()).toBe(queries);
    expect((await admin.query('SELECT id, balance FROM accounts ORDER BY id')).rows).toEqual(before);
    expect((await admin.query("SELECT count(*)::int AS n FROM everdict_receipts WHERE idempotency_key LIKE 'r_'")).rows[0]).toEqual({ n: 0 });
  });

  it('binds every parameter as a typed value: SQL in a parameter is data', async () => {
    const packet = credit("a2' OR true --", 1);
    const report = await connector.execute(packet, { callId: CALL_ID, idempotencyKey: 'pg-key-injection' }, ctx);
    expect(report).toMatchObject({ outcome: 'not_applied', reason: 'row_count_mismatch' });
    expect((await admin.query('SELECT sum(balance)::int AS total FROM accounts')).rows[0]).toEqual({ total: 160 });
  });

  it('reads through reviewed templates', async () => {
    const read = await connector.read('accounts.get', { id: 'a7' }, ctx);
    expect(read.value).toEqual({ rowCount: 1, rows: [{ id: 'a7', balance: '10', region: 'us' }] });
  });

  it('re-reads preconditions at preflight; a changed precondition is preflight_changed', async () => {
    const packet = credit('a7', 1, { preconditions: [{ id: 'bal', read: { operation: 'accounts.get', params: { id: 'a7' } }, pointer: '/rows/0/balance', equals: '10' }] });
    expect(await connector.preflight(packet, ctx)).toEqual({ status: 'unchanged', checked: ['bal'] });
    await admin.query("UPDATE accounts SET balance = 11 WHERE id = 'a7'");
    expect(await connector.preflight(packet, ctx)).toMatchObject({ status: 'preflight_changed', changed: [{ id: 'bal', expected: '10', observed: '11' }] });
  });

  it('establishes not_applied for a key that never ran, and fences it so it can never apply later', async () => {
    const packet = credit('a4', 9);
    const call = { callId: CALL_ID, idempotencyKey: 'pg-key-never' };
    expect(await connector.whatLanded(packet, call, ctx)).toMatchObject({ outcome: 'not_applied', reason: 'no_receipt' });
    expect(await connector.execute(packet, call, ctx)).toMatchObject({ outcome: 'not_applied', reason: 'key_fenced' });
    expect(await balance('a4')).toBe(0);
    expect(await connector.whatLanded(packet, call, ctx)).toMatchObject({ outcome: 'not_applied', reason: 'key_fenced' });
  });

  it('answers unknown while an execution holding the key is still open', async () => {
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        "INSERT INTO everdict_receipts (idempotency_key, operation, outcome, packet_digest, call_id) VALUES ('pg-key-open', 'accounts.credit', 'applied', 'x', 'y')",
      );
      const report = await connector.whatLanded(credit('a5', 1), { callId: CALL_ID, idempotencyKey: 'pg-key-open' }, ctx);
      expect(report).toMatchObject({ outcome: 'unknown', reason: 'key_in_flight' });
      await holder.query('ROLLBACK');
    } finally {
      await holder.end();
    }
    expect(await connector.whatLanded(credit('a5', 1), { callId: CALL_ID, idempotencyKey: 'pg-key-open' }, ctx)).toMatchObject({ outcome: 'not_applied' });
  });

  it('a connection lost after COMMIT was sent is unknown; WhatLanded establishes applied and nothing applies twice', async () => {
    const { proxy, connector: cut } = await viaProxy();
    const packet = credit('a5', 25);
    const call = { callId: CALL_ID, idempotencyKey: 'pg-key-commit-lost' };
    proxy.armed = { marker: 'COMMIT', mode: 'forward_then_cut' };
    const report = await cut.execute(packet, call, ctx);
    expect(report).toMatchObject({ outcome: 'unknown', reason: 'connection_lost_during_commit' });
    expect(mayRetryAutomatically(cut.describe(), report.outcome)).toBe(false);

    const landed = await cut.whatLanded(packet, call, ctx);
    expect(landed).toMatchObject({ outcome: 'applied', receipt: { rows: 1, idempotencyKey: 'pg-key-commit-lost' } });
    expect(await balance('a5')).toBe(25);
    // Even a blind repeat under the same key cannot apply twice.
    expect((await cut.execute(packet, call, ctx)).outcome).toBe('applied');
    expect(await balance('a5')).toBe(25);
  });

  it('a connection lost before COMMIT is not_applied, and WhatLanded agrees', async () => {
    const { proxy, connector: cut } = await viaProxy();
    const packet = credit('a6', 3);
    const call = { callId: CALL_ID, idempotencyKey: 'pg-key-cut-early' };
    proxy.armed = { marker: 'UPDATE accounts', mode: 'cut_before' };
    const report = await cut.execute(packet, call, ctx);
    expect(report).toMatchObject({ outcome: 'not_applied', reason: 'connection_lost_before_commit' });
    // The orphaned server transaction may hold the key briefly; WhatLanded waits or says unknown, never guesses.
    let landed = await cut.whatLanded(packet, call, ctx);
    for (let i = 0; landed.outcome === 'unknown' && i < 20; i++) landed = await cut.whatLanded(packet, call, ctx);
    expect(landed).toMatchObject({ outcome: 'not_applied' });
    expect(await balance('a6')).toBe(0);
  });
});
