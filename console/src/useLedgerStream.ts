/**
 * Follows a case's ledger over Server-Sent Events (GET /v1/cases/:id/ledger/stream).
 *
 * The browser's own EventSource retry is not relied on: on any error the stream is closed and
 * reopened after a short backoff with `?after=<cursor>` — the highest seq received — so the
 * server replays exactly what was missed. Duplicates are dropped by seq (ledgerTimeline.ts).
 * Each new record is a reference: the caller refreshes the case it belongs to (`onRecord`),
 * the stream is never a second copy of the case's state.
 */
import { useEffect, useRef, useState } from 'react';
import { EMPTY_TIMELINE, parseLedgerEvent, receive } from './ledgerTimeline.js';
import type { Timeline } from './ledgerTimeline.js';

export type StreamStatus = 'connecting' | 'live' | 'reconnecting' | 'closed' | 'not_found';

export interface LedgerStream {
  readonly timeline: Timeline;
  readonly status: StreamStatus;
  /** How many times the stream was reopened after an error. */
  readonly reconnects: number;
}

const BACKOFF_MS = [250, 500, 1000, 2000, 4000];

export function useLedgerStream(caseId: string, onRecord: () => void): LedgerStream {
  const [timeline, setTimeline] = useState<Timeline>(EMPTY_TIMELINE);
  const [status, setStatus] = useState<StreamStatus>('connecting');
  const [reconnects, setReconnects] = useState(0);
  const cursor = useRef(0);
  const onRecordRef = useRef(onRecord);
  onRecordRef.current = onRecord;

  useEffect(() => {
    cursor.current = 0;
    setTimeline(EMPTY_TIMELINE);
    let source: EventSource | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let failures = 0;
    let stopped = false;

    const open = () => {
      if (stopped) return;
      const es = new EventSource(`/v1/cases/${encodeURIComponent(caseId)}/ledger/stream?after=${cursor.current}`, { withCredentials: true });
      source = es;
      es.onopen = () => {
        failures = 0;
        setStatus('live');
      };
      es.addEventListener('ledger', (ev) => {
        const entry = parseLedgerEvent((ev as MessageEvent<string>).data);
        if (!entry) return;
        if (entry.seq > cursor.current) cursor.current = entry.seq;
        setTimeline((t) => receive(t, [entry]));
        onRecordRef.current();
      });
      es.onerror = () => {
        es.close();
        if (stopped) return;
        setStatus('reconnecting');
        void probeMissing(caseId).then((missing) => {
          if (stopped) return;
          if (missing) {
            setStatus('not_found');
            return;
          }
          const delay = BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)]!;
          failures += 1;
          timer = setTimeout(() => {
            setReconnects((n) => n + 1);
            open();
          }, delay);
        });
      };
    };
    open();
    return () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      source?.close();
      setStatus('closed');
    };
  }, [caseId]);

  return { timeline, status, reconnects };
}

/** EventSource hides the status of a failed stream: a 404 (or 401) ends following, anything else retries. */
async function probeMissing(caseId: string): Promise<boolean> {
  try {
    const res = await fetch(`/v1/cases/${encodeURIComponent(caseId)}/ledger?limit=1`, { credentials: 'same-origin' });
    return res.status === 404 || res.status === 401;
  } catch {
    return false;
  }
}
