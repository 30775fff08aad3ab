/**
 * The live ledger (seed 004 §8, §11; issue 14 item 1) on a REAL node over real Postgres:
 * `GET /v1/cases/:id/ledger/stream` replays a case's ledger from the cursor and then delivers
 * records as they commit (woken by the process's ledger feed, well before the stream's poll); a connection dropped
 * mid-stream and resumed with `Last-Event-ID` while writers keep appending yields every sequence
 * exactly once — no duplicate, no gap — and the records received form the chain
 * verifyCaseLedger verifies, identical to GET /v1/cases/:id/ledger. Another customer's case is
 * a 404, as for GET /v1/cases/:id.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store, verifyCaseLedger, verifyChain } from '@everdict/store';
import { openAcmeCase, startConsoleNode } from './consoleNode.js';
import type { ConsoleNode } from './consoleNode.js';
import { TOKENS } from './helpers.js';

let node: ConsoleNode;
let store: Store;

beforeAll(async () => {
  node = await startConsoleNode('intake_ledger_stream');
  store = new Store(node.db);
}, 120_000);

afterAll(async () => {
  await node?.stop();
});

interface Entry {
  seq: number;
  recordId: string;
  kind: string;
  body: unknown;
  prevHash: string;
  hash: string;
  createdAt: string;
}

interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
}

/** A minimal EventSource over fetch: events as they arrive, comments counted, abortable. */
class SseClient {
  readonly events: SseEvent[] = [];
  comments = 0;
  status = 0;
  contentType = '';
  private readonly abort = new AbortController();
  private waiters: (() => void)[] = [];
  readonly done: Promise<void>;
  /** The server ended the response properly (not a dropped connection, not our abort). */
  endedCleanly = false;
  /** Why the request or the stream failed (our own abort included), if it did. */
  failure: string | undefined;

  constructor(url: string, headers: Record<string, string>) {
    this.done = this.run(url, headers).then(
      () => {
        this.endedCleanly = true;
      },
      (err: unknown) => {
        this.failure = err instanceof Error ? `${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}` : String(err);
        this.notify();
      },
    );
  }

  private async run(url: string, headers: Record<string, string>): Promise<void> {
    const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: this.abort.signal });
    this.status = res.status;
    this.contentType = res.headers.get('content-type') ?? '';
    this.notify();
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const ev: SseEvent = {};
        let comment = false;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) comment = true;
          else if (line.startsWith('id: ')) ev.id = line.slice(4);
          else if (line.startsWith('event: ')) ev.event = line.slice(7);
          else if (line.startsWith('data: ')) ev.data = line.slice(6);
        }
        if (comment) this.comments++;
        else if (ev.event !== undefined) this.events.push(ev);
        this.notify();
      }
    }
  }

  private notify(): void {
    const w = this.waiters;
    this.waiters = [];
    w.forEach((f) => f());
  }

  entries(): Entry[] {
    return this.events.filter((e) => e.event === 'ledger').map((e) => JSON.parse(e.data!) as Entry);
  }

  /** Resolves once `pred` holds (checked at every event), or rejects after `ms`. */
  async until(pred: () => boolean, ms = 15_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`SSE condition not met within ${ms} ms (${this.events.length} events, status ${this.status}${this.failure ? `, failed: ${this.failure}` : ''})`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.abort.abort();
  }
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const streamUrl = (caseId: string, after?: number) => `${node.url}/v1/cases/${caseId}/ledger/stream${after === undefined ? '' : `?after=${after}`}`;

async function append(caseId: string, n: number, label: string): Promise<void> {
  for (let i = 0; i < n; i++) await store.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'console_probe', body: { label, i } }));
}

async function ledgerPage(caseId: string): Promise<Entry[]> {
  const r = await fetch(`${node.url}/v1/cases/${caseId}/ledger?limit=1000`, { headers: bearer(TOKENS.olga) });
  return ((await r.json()) as { entries: Entry[] }).entries;
}

describe('live ledger over SSE', () => {
  it('replays from the cursor, then delivers each record as it commits (woken by the feed, not the 2 s poll)', async () => {
    const caseId = await openAcmeCase(node.url, 'stream-live');
    const replayed = (await ledgerPage(caseId)).length;
    expect(replayed).toBeGreaterThan(0);
    const sse = new SseClient(streamUrl(caseId), bearer(TOKENS.acme));
    try {
      await sse.until(() => sse.entries().length === replayed);
      expect(sse.status).toBe(200);
      expect(sse.contentType).toMatch(/^text\/event-stream/);
      expect(sse.events[0]!.id).toBe('1');

      const latencies: number[] = [];
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        await append(caseId, 1, `live-${i}`);
        await sse.until(() => sse.entries().length === replayed + i + 1);
        latencies.push(performance.now() - t0);
      }
      // The stream's poll is 2000 ms: five records each seen well under it were woken by the feed
      // (it reads the heads of the followed cases every 200 ms).
      expect(Math.max(...latencies)).toBeLessThan(1000);
      const got = sse.entries();
      expect(got.map((e) => e.seq)).toEqual(Array.from({ length: replayed + 5 }, (_, i) => i + 1));
      // The same JSON as the paged ledger, record for record.
      expect(got).toEqual(await ledgerPage(caseId));
      console.log(`ledger stream: commit → event latency ms ${latencies.map((l) => l.toFixed(1)).join(', ')}`);
    } finally {
      sse.close();
      await sse.done;
    }
  });

  it('starts after `after` and resumes after Last-Event-ID: dropped mid-stream under concurrent writers, no duplicate and no gap', async () => {
    const caseId = await openAcmeCase(node.url, 'stream-resume');
    await append(caseId, 20, 'before');
    const startAfter = 3;
    const first = new SseClient(streamUrl(caseId, startAfter), bearer(TOKENS.olga));
    // Writers keep appending — from two concurrent appenders — while the stream is cut and resumed.
    const writers = Promise.all([append(caseId, 60, 'writer-a'), append(caseId, 60, 'writer-b')]);
    await first.until(() => first.entries().length >= 30);
    first.close();
    await first.done;
    const seen = first.entries();
    expect(seen[0]!.seq).toBe(startAfter + 1);
    const lastId = first.events.filter((e) => e.event === 'ledger').at(-1)!.id!;

    // The browser's reconnect: same URL (its original `after`), Last-Event-ID = the last id seen.
    const second = new SseClient(streamUrl(caseId, startAfter), { ...bearer(TOKENS.olga), 'last-event-id': lastId });
    try {
      await writers;
      const head = (await verifyCaseLedger(node.db, caseId)).head!.seq;
      await second.until(() => (second.entries().at(-1)?.seq ?? 0) >= head);
      // Give a duplicate, if the stream would send one, the chance to arrive.
      await new Promise((r) => setTimeout(r, 300));
      const all = [...seen, ...second.entries()];
      expect(second.entries()[0]!.seq).toBe(Number(lastId) + 1);
      expect(all.map((e) => e.seq)).toEqual(Array.from({ length: head - startAfter }, (_, i) => startAfter + i + 1));

      // Verified against the chain: the records up to the cursor (read by page) plus those
      // streamed are exactly the chain verifyCaseLedger checks, hash for hash.
      const verification = await verifyCaseLedger(node.db, caseId);
      expect(verification.ok).toBe(true);
      const prefix = (await ledgerPage(caseId)).slice(0, startAfter);
      const chain = [...prefix, ...all].map((e) => ({ ...e, caseId }));
      expect(verifyChain(chain, verification.head)).toMatchObject({ ok: true, records: head });
      expect(all.at(-1)).toMatchObject({ seq: verification.lastRecord!.seq, hash: verification.lastRecord!.hash });
    } finally {
      second.close();
      await second.done;
    }
  });

  it('ends a stream whose client left; the node keeps serving', async () => {
    const caseId = await openAcmeCase(node.url, 'stream-idle');
    const sse = new SseClient(streamUrl(caseId), bearer(TOKENS.acme));
    await sse.until(() => sse.entries().length > 0);
    sse.close();
    await sse.done;
    // The node still serves (the closed stream released its resources without failing the process).
    expect((await fetch(`${node.url}/readyz`)).status).toBe(200);
  });

  it('is a 404 for another customer’s case and for an unknown case; 401 without a principal', async () => {
    const caseId = await openAcmeCase(node.url, 'stream-owned');
    const other = await fetch(streamUrl(caseId), { headers: bearer(TOKENS.globex) });
    expect(other.status).toBe(404);
    expect(((await other.json()) as { error: string }).error).toBe('case_not_found');
    const unknown = await fetch(streamUrl('00000000-0000-4000-8000-000000000000'), { headers: bearer(TOKENS.olga) });
    expect(unknown.status).toBe(404);
    await unknown.text();
    const anon = await fetch(streamUrl(caseId));
    expect(anon.status).toBe(401);
    await anon.text();
    const bad = await fetch(`${streamUrl(caseId)}`, { headers: { ...bearer(TOKENS.acme), 'last-event-id': 'abc' } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { field: string }).field).toBe('Last-Event-ID');
  });

  // Last: it stops the node.
  it('ends open streams when the node drains, so shutdown is not held up by a client', async () => {
    const caseId = await openAcmeCase(node.url, 'stream-drain');
    const sse = new SseClient(streamUrl(caseId), bearer(TOKENS.acme));
    await sse.until(() => sse.entries().length > 0);
    const t0 = performance.now();
    await node.stop();
    await sse.done;
    // The stream was ended by the server as the drain began (the client reconnects elsewhere
    // with Last-Event-ID), not cut when the HTTP server dropped what was left open.
    expect(sse.endedCleanly).toBe(true);
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(node.output()).not.toMatch(/http handler failed/);
  });
});
