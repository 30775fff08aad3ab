/**
 * The live ledger of a case (seed 004 §8, §11): `GET /v1/cases/:id/ledger/stream?after=SEQ` as
 * Server-Sent Events. Each record is one event — `id: <seq>`, `event: ledger`, `data: <the entry
 * exactly as GET /v1/cases/:id/ledger lists it>` — replayed from the cursor out of the ledger
 * table, then followed as rows commit. A reconnecting client (EventSource does it by itself)
 * sends `Last-Event-ID` and resumes after it.
 *
 * No gap, no duplicate: every read is `seq > last sent ORDER BY seq` from the table, and a
 * case's appends are serialised on its ledger head row (FOR UPDATE until COMMIT), so seq N+1
 * never becomes visible before seq N. The wake-up is a reference, never the record: the feed
 * seeing the case's ledger head move (LedgerFeed) or the stream's own poll; either only
 * triggers the next read.
 * Ownership is the router's: a case the principal may not see is a 404 before anything streams.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { integerParam } from '@everdict/http-api';
import type { Store } from '@everdict/store';
import { ledgerEntryView } from './views.js';

const PAGE = 500;

export interface LedgerStreamTiming {
  /** Reads the table this often even without a wake-up from the feed (default 2000 ms). */
  readonly pollMs: number;
  /** `: keepalive` comment this often, for proxies that close silent connections (default 15000 ms). */
  readonly heartbeatMs: number;
}

export const DEFAULT_LEDGER_STREAM_TIMING: LedgerStreamTiming = { pollMs: 2000, heartbeatMs: 15_000 };

/** How often a feed reads the heads of the cases its streams follow (LedgerFeed). */
export const DEFAULT_LEDGER_FEED_POLL_MS = 200;

/**
 * One watcher per process for every open stream: every `pollMs`, while any stream is open, ONE
 * indexed read of `ledger_heads` for the cases followed; a case whose head moved wakes its
 * streams. Writers pay nothing for it (migration 0024 removed the per-row NOTIFY: every turn
 * commit took Postgres's cluster-wide NOTIFY lock across its WAL flush). A head seen for the
 * first time wakes too, so an append between a stream's first read and the feed's first look
 * is not left to the stream's own poll. A failed read is skipped: the streams' poll covers it.
 */
export class LedgerFeed {
  private readonly subscribers = new Map<string, Set<() => void>>();
  private readonly heads = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private reading = false;

  constructor(private readonly pollMs = DEFAULT_LEDGER_FEED_POLL_MS) {}

  start(store: Store): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.look(store), this.pollMs);
    this.timer.unref();
  }

  private async look(store: Store): Promise<void> {
    if (this.reading || this.subscribers.size === 0) return;
    this.reading = true;
    try {
      for (const [caseId, seq] of await store.ledgerHeads([...this.subscribers.keys()])) {
        if (this.heads.get(caseId) === seq) continue;
        this.heads.set(caseId, seq);
        for (const wake of this.subscribers.get(caseId) ?? []) wake();
      }
    } catch {
      // The database is away: the streams' reads fail or wait alike, and their poll retries.
    } finally {
      this.reading = false;
    }
  }

  subscribe(caseId: string, wake: () => void): () => void {
    let set = this.subscribers.get(caseId);
    if (!set) this.subscribers.set(caseId, (set = new Set()));
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size > 0) return;
      this.subscribers.delete(caseId);
      this.heads.delete(caseId);
    };
  }

  /** Open streams (for tests and the log). */
  streams(): number {
    let n = 0;
    for (const s of this.subscribers.values()) n += s.size;
    return n;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** The cursor: `Last-Event-ID` (a reconnect) wins over `after` when it is further on. */
export function streamCursor(url: URL, lastEventId: string | string[] | undefined): number {
  const after = integerParam(url.searchParams, 'after', { min: 0, default: 0 });
  if (lastEventId === undefined) return after;
  const text = Array.isArray(lastEventId) ? lastEventId[0] : lastEventId;
  // An empty Last-Event-ID (a stream that sent no event yet) resumes nothing.
  if (text === undefined || text === '') return after;
  return Math.max(after, integerParam(new URLSearchParams({ 'Last-Event-ID': text }), 'Last-Event-ID', { min: 0 }));
}

/** One SSE event of a ledger row. JSON never holds a raw CR or LF, so `data` is one line. */
export function ledgerEvent(entry: ReturnType<typeof ledgerEntryView>): string {
  return `id: ${entry.seq}\nevent: ledger\ndata: ${JSON.stringify(entry)}\n\n`;
}

interface StreamOptions {
  readonly store: Store;
  readonly feed: LedgerFeed;
  readonly caseId: string;
  readonly after: number;
  /** Aborted at shutdown: the stream ends (the client reconnects elsewhere with Last-Event-ID). */
  readonly signal: AbortSignal;
  readonly timing?: LedgerStreamTiming;
}

/** Streams until the client goes away or the signal aborts; resolves then. */
export async function streamLedger(req: IncomingMessage, res: ServerResponse, o: StreamOptions): Promise<void> {
  const timing = o.timing ?? DEFAULT_LEDGER_STREAM_TIMING;
  let closed = false;
  let dirty = true;
  let wake: (() => void) | undefined;
  const rouse = () => {
    dirty = true;
    wake?.();
  };
  const end = () => {
    closed = true;
    wake?.();
  };
  req.on('close', end);
  res.on('close', end);
  o.signal.addEventListener('abort', end, { once: true });
  const unsubscribe = o.feed.subscribe(o.caseId, rouse);

  res.statusCode = 200;
  res.setHeader('content-type', 'text/event-stream; charset=utf-8');
  res.setHeader('cache-control', 'no-store');
  res.setHeader('connection', 'keep-alive');
  // Reverse proxies (nginx) must not buffer the stream.
  res.setHeader('x-accel-buffering', 'no');
  res.flushHeaders();
  const heartbeat = setInterval(() => {
    if (!closed) res.write(': keepalive\n\n');
  }, timing.heartbeatMs);

  const write = async (text: string) => {
    if (res.write(text) || closed) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  };

  let last = o.after;
  try {
    await write(`retry: 2000\n\n`);
    while (!closed) {
      if (!dirty) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, timing.pollMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
        if (closed) break;
      }
      // Cleared BEFORE the read: a wake-up that lands during it makes the loop read again.
      dirty = false;
      const rows = await o.store.readLedger(o.caseId, last, PAGE);
      for (const r of rows) {
        if (closed) break;
        await write(ledgerEvent(ledgerEntryView(r)));
        last = r.seq;
      }
      if (rows.length === PAGE) dirty = true;
    }
  } finally {
    clearInterval(heartbeat);
    unsubscribe();
    o.signal.removeEventListener('abort', end);
    if (!res.writableEnded) res.end();
  }
}
