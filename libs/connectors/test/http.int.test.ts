/**
 * The HTTP-service connector against a REAL target HTTP server (node:http) that records every
 * request it receives and keeps its own idempotency receipts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { EffectCheck, EffectPacket } from '@everdict/contracts';
import { sealPacket } from '@everdict/contracts';
import type { HttpServiceConfig } from '@everdict/connectors';
import { ConnectorRefused, HttpServiceConnector, checkAssertions, mayRetryAutomatically } from '@everdict/connectors';
import { CALL_ID, ctx, packetFor } from './fixtures.js';

interface Recorded {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A small billing service: credits with Idempotency-Key, receipts by key, account reads. */
class TargetService {
  readonly requests: Recorded[] = [];
  readonly receipts = new Map<string, { accountId: string; amountCents: number; balanceCents: number }>();
  balances = new Map<string, number>();
  applies = 0;
  /** What the server does after applying a credit. */
  mode: 'answer' | 'destroy_after_apply' | 'fail_500' | 'hang' = 'answer';
  private readonly server = http.createServer((req, res) => this.handle(req, res));
  port = 0;

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  mutations(): Recorded[] {
    return this.requests.filter((r) => r.method !== 'GET');
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      this.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const send = (status: number, payload: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(payload));
      };
      const url = req.url ?? '';
      let m: RegExpExecArray | null;
      if (req.method === 'GET' && (m = /^\/api\/accounts\/([^/]+)$/.exec(url))) {
        const id = decodeURIComponent(m[1] ?? '');
        if (id === 'broken') return send(503, { error: 'unavailable' });
        const balance = this.balances.get(id);
        return balance === undefined ? send(404, { error: 'no_such_account' }) : send(200, { id, balanceCents: balance });
      }
      if (req.method === 'GET' && (m = /^\/api\/receipts\/([^/]+)$/.exec(url))) {
        const receipt = this.receipts.get(decodeURIComponent(m[1] ?? ''));
        return receipt === undefined ? send(404, { error: 'no_receipt' }) : send(200, receipt);
      }
      if (req.method === 'POST' && (m = /^\/api\/accounts\/([^/]+)\/credit$/.exec(url))) {
        const key = req.headers['idempotency-key'];
        if (typeof key !== 'string') return send(400, { error: 'idempotency_key_required' });
        const prior = this.receipts.get(key);
        if (prior !== undefined) return send(200, prior);
        const { amountCents } = JSON.parse(body) as { amountCents: number };
        const id = decodeURIComponent(m[1] ?? '');
        if (amountCents > 1_000_000) return send(422, { error: 'over_limit' });
        if (this.mode === 'fail_500') return send(500, { error: 'boom' });
        if (this.mode === 'hang') return;
        const balanceCents = (this.balances.get(id) ?? 0) + amountCents;
        this.balances.set(id, balanceCents);
        this.applies++;
        const receipt = { accountId: id, amountCents, balanceCents };
        this.receipts.set(key, receipt);
        // The effect is applied and recorded; the answer never leaves.
        if (this.mode === 'destroy_after_apply') return void req.socket.destroy();
        return send(201, receipt);
      }
      send(404, { error: 'no_route' });
    });
  }
}

const target = new TargetService();

function config(over: Partial<HttpServiceConfig> = {}): HttpServiceConfig {
  return {
    name: 'billing',
    target: { system: 'billing', environment: 'test' },
    baseUrl: `http://127.0.0.1:${target.port}/api`,
    headers: { authorization: 'Bearer target-token' },
    timeoutMs: 2000,
    receipts: { path: '/receipts/{idempotencyKey}', conclusive: true },
    operations: [
      {
        name: 'accounts.credit',
        kind: 'mutate',
        method: 'POST',
        path: '/accounts/{accountId}/credit',
        body: { amountCents: '{{amountCents}}', note: 'refund' },
        params: { accountId: { type: 'string', maxLength: 32, pattern: '[a-z0-9-]+' }, amountCents: { type: 'integer', minimum: 1, maximum: 10_000_000 } },
        effectClass: 'payment',
      },
      { name: 'accounts.get', kind: 'read', method: 'GET', path: '/accounts/{accountId}', params: { accountId: { type: 'string', maxLength: 32 } } },
    ],
    ...over,
  };
}

const credit = (accountId: string, amountCents: number, extra: { preconditions?: EffectCheck[]; assertions?: EffectCheck[] } = {}) =>
  sealPacket(packetFor({ connector: 'billing', operation: 'accounts.credit', effectClass: 'payment', params: { accountId, amountCents }, ...extra }));

const balanceIs = (id: string, accountId: string, cents: number): EffectCheck => ({ id, read: { operation: 'accounts.get', params: { accountId } }, pointer: '/body/balanceCents', equals: cents });

let connector: HttpServiceConnector;

beforeAll(async () => {
  await target.start();
  connector = new HttpServiceConnector(config());
});
afterAll(async () => {
  await target.stop();
});
beforeEach(() => {
  target.mode = 'answer';
});

describe('HTTP-service connector against a real target', () => {
  it('sends every mutation with the idempotency key and the exact bound body', async () => {
    target.balances.set('acct-1', 0);
    const packet = credit('acct-1', 1500);
    const report = await connector.execute(packet, { callId: CALL_ID, idempotencyKey: 'key-apply-1' }, ctx);
    expect(report).toMatchObject({ outcome: 'applied', receipt: { httpStatus: 201, idempotencyKey: 'key-apply-1', body: { balanceCents: 1500 } } });
    expect(report.observedAt).toBe('2026-09-04T12:00:00.000Z');

    const sent = target.mutations().at(-1);
    expect(sent?.url).toBe('/api/accounts/acct-1/credit');
    expect(sent?.headers['idempotency-key']).toBe('key-apply-1');
    expect(sent?.headers['everdict-call-id']).toBe(CALL_ID);
    expect(sent?.headers['everdict-packet-digest']).toBe(packet.digest);
    expect(sent?.headers['authorization']).toBe('Bearer target-token');
    expect(JSON.parse(sent?.body ?? '')).toEqual({ amountCents: 1500, note: 'refund' });
  });

  it('reports unknown when the target applies and drops the connection, then establishes applied from the receipt', async () => {
    target.balances.set('acct-2', 100);
    target.mode = 'destroy_after_apply';
    const before = target.mutations().length;
    const call = { callId: CALL_ID, idempotencyKey: 'key-dropped-2' };
    const packet = credit('acct-2', 700);

    const report = await connector.execute(packet, call, ctx);
    expect(report).toMatchObject({ outcome: 'unknown', reason: 'connection_lost' });
    expect(mayRetryAutomatically(connector.describe(), report.outcome)).toBe(false);

    target.mode = 'answer';
    const landed = await connector.whatLanded(packet, call, ctx);
    expect(landed).toMatchObject({ outcome: 'applied', receipt: { body: { accountId: 'acct-2', amountCents: 700, balanceCents: 800 } } });
    expect(landed.established).toMatch(/receipt/);

    // Exactly one apply reached the service; the lookup was a GET carrying the same key.
    expect(target.mutations().length - before).toBe(1);
    expect(target.receipts.get('key-dropped-2')).toBeDefined();
    expect(target.balances.get('acct-2')).toBe(800);
    const lookup = target.requests.at(-1);
    expect(lookup?.method).toBe('GET');
    expect(lookup?.url).toBe('/api/receipts/key-dropped-2');
    expect(lookup?.headers['idempotency-key']).toBe('key-dropped-2');
  });

  it('reports not_applied with the reason on a 4xx, and the state is unchanged', async () => {
    target.balances.set('acct-3', 5);
    const report = await connector.execute(credit('acct-3', 2_000_000), { callId: CALL_ID, idempotencyKey: 'key-422' }, ctx);
    expect(report).toMatchObject({ outcome: 'not_applied', reason: 'http_422', receipt: { httpStatus: 422, body: { error: 'over_limit' } } });
    expect(target.balances.get('acct-3')).toBe(5);
    expect(mayRetryAutomatically(connector.describe(), report.outcome)).toBe(true);
  });

  it('reports unknown on a 5xx and on a deadline, never throwing', async () => {
    target.mode = 'fail_500';
    await expect(connector.execute(credit('acct-4', 1), { callId: CALL_ID, idempotencyKey: 'key-500' }, ctx)).resolves.toMatchObject({ outcome: 'unknown', reason: 'http_500' });
    target.mode = 'hang';
    const impatient = new HttpServiceConnector(config({ timeoutMs: 200 }));
    await expect(impatient.execute(credit('acct-4', 1), { callId: CALL_ID, idempotencyKey: 'key-hang' }, ctx)).resolves.toMatchObject({ outcome: 'unknown', reason: 'connection_lost' });
  });

  it('reports not_applied when no connection could be made at all', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const nowhere = new HttpServiceConnector(config({ baseUrl: `http://127.0.0.1:${port}/api` }));
    await expect(nowhere.execute(credit('acct-5', 1), { callId: CALL_ID, idempotencyKey: 'key-refused' }, ctx)).resolves.toMatchObject({ outcome: 'not_applied', reason: 'not_sent' });
    await expect(nowhere.whatLanded(credit('acct-5', 1), { callId: CALL_ID, idempotencyKey: 'key-refused' }, ctx)).resolves.toMatchObject({ outcome: 'unknown' });
    // A read that got no reply at all is unavailable, and says the target never answered.
    await expect(nowhere.read('accounts.get', { accountId: 'acct-5' }, ctx)).rejects.toMatchObject({ code: 'connector_down', details: { answered: false } });
  });

  it('refuses before contact: the target sees nothing', async () => {
    const before = target.requests.length;
    const base = credit('acct-6', 10);
    const attempts: [EffectPacket, string][] = [
      [sealPacket({ ...base, target: { ...base.target, environment: 'prod' } }), 'target_mismatch'],
      [sealPacket({ ...base, operation: { connector: 'billing', name: 'accounts.delete' } }), 'unregistered_operation'],
      [sealPacket({ ...base, operation: { connector: 'billing', name: 'accounts.get' } }), 'not_a_mutation'],
      [sealPacket({ ...base, params: { accountId: '../admin', amountCents: 10 } }), 'invalid_params'],
      [sealPacket({ ...base, operation: { ...base.operation, templateHash: `sha256:${'e'.repeat(64)}` } }), 'template_changed'],
      [{ ...base, params: { accountId: 'acct-6', amountCents: 11 } }, 'invalid_packet'], // digest no longer matches
    ];
    for (const [packet, reason] of attempts) {
      await expect(connector.execute(packet, { callId: CALL_ID, idempotencyKey: 'key-refused-6' }, ctx)).rejects.toMatchObject({ code: 'connector_refused', reason });
      await expect(connector.preflight(packet, ctx)).rejects.toBeInstanceOf(ConnectorRefused);
    }
    await expect(connector.execute(base, { callId: CALL_ID, idempotencyKey: 'has space' }, ctx)).rejects.toMatchObject({ reason: 'invalid_idempotency_key' });
    await expect(connector.read('accounts.credit', { accountId: 'acct-6', amountCents: 1 }, ctx)).rejects.toMatchObject({ reason: 'not_a_read' });
    await expect(connector.read('GET /admin', {}, ctx)).rejects.toMatchObject({ reason: 'unregistered_operation' });
    expect(target.requests.length).toBe(before);
  });

  it('renders a dry run without contacting the target', async () => {
    const before = target.requests.length;
    const dry = await connector.dryRun(credit('acct-7', 42));
    expect(dry).toEqual({ kind: 'render', rendered: { method: 'POST', url: `http://127.0.0.1:${target.port}/api/accounts/acct-7/credit`, body: '{"amountCents":42,"note":"refund"}' } });
    expect(target.requests.length).toBe(before);
  });

  it('re-reads preconditions at preflight and runs assertions as the post-check', async () => {
    target.balances.set('acct-8', 300);
    const packet = credit('acct-8', 200, { preconditions: [balanceIs('balance-before', 'acct-8', 300)], assertions: [balanceIs('balance-after', 'acct-8', 500)] });
    expect(await connector.preflight(packet, ctx)).toEqual({ status: 'unchanged', checked: ['balance-before'] });

    target.balances.set('acct-8', 301); // someone else moved the balance
    expect(await connector.preflight(packet, ctx)).toEqual({
      status: 'preflight_changed',
      checked: ['balance-before'],
      changed: [{ id: 'balance-before', pointer: '/body/balanceCents', expected: 300, observed: 301 }],
    });

    target.balances.set('acct-8', 300);
    expect((await connector.execute(packet, { callId: CALL_ID, idempotencyKey: 'key-8' }, ctx)).outcome).toBe('applied');
    expect(await checkAssertions(connector, packet, ctx)).toEqual({ status: 'holds', checked: ['balance-after'] });
  });

  it('a read answers 4xx as state and refuses to guess on 5xx', async () => {
    const read = await connector.read('accounts.get', { accountId: 'nobody' }, ctx);
    expect(read.value).toEqual({ status: 404, body: { error: 'no_such_account' } });
    await expect(connector.read('accounts.get', { accountId: 'broken' }, ctx)).rejects.toMatchObject({ code: 'connector_down', retryable: true, details: { answered: true } });
  });

  it('takes a missing receipt as absence only from a service that declares receipts conclusive', async () => {
    const packet = credit('acct-9', 1);
    const call = { callId: CALL_ID, idempotencyKey: 'key-never-sent' };
    const conclusive = await connector.whatLanded(packet, call, ctx);
    expect(conclusive).toMatchObject({ outcome: 'not_applied', reason: 'no_receipt' });

    const vague = new HttpServiceConnector(config({ receipts: { path: '/receipts/{idempotencyKey}', conclusive: false } }));
    expect(vague.describe().whatLandedConclusive).toBe(false);
    const answer = await vague.whatLanded(packet, call, ctx);
    expect(answer).toMatchObject({ outcome: 'unknown', reason: 'no_receipt' });
    for (const outcome of ['not_applied', 'unknown'] as const) expect(mayRetryAutomatically(vague.describe(), outcome)).toBe(false);
  });

  it('refuses a configuration with undeclared placeholders or reserved headers', () => {
    expect(() => new HttpServiceConnector(config({ headers: { 'Idempotency-Key': 'fixed' } }))).toThrow(/set by the connector/);
    expect(
      () =>
        new HttpServiceConnector(
          config({ operations: [{ name: 'x', kind: 'mutate', method: 'POST', path: '/x/{id}', params: {}, effectClass: 'dml' }] }),
        ),
    ).toThrow(/placeholder "id" is not a declared parameter/);
  });
});
