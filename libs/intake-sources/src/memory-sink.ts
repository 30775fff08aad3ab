/**
 * An in-memory ArrivalSink with intake's dedup contract (one case per origin key), for tests
 * and demos. It records every call, so a test can tell "delivered twice, opened once" apart
 * from "delivered once".
 */
import { newId } from '@everdict/contracts';
import type { ArrivalSink, NormalisedArrival, OpenedCase } from './arrival.js';

export class InMemoryArrivalSink implements ArrivalSink {
  /** Every arrival handed to `open`, in call order (duplicates included). */
  readonly calls: NormalisedArrival[] = [];
  private readonly byKey = new Map<string, { caseId: string; arrival: NormalisedArrival }>();
  /** When set, `open` throws it (once per set) before recording anything — a sink outage. */
  failNext: Error | null = null;

  async open(arrival: NormalisedArrival): Promise<OpenedCase> {
    if (this.failNext !== null) {
      const err = this.failNext;
      this.failNext = null;
      throw err;
    }
    this.calls.push(structuredClone(arrival));
    const seen = this.byKey.get(arrival.originKey);
    if (seen !== undefined) return { caseId: seen.caseId, created: false };
    const caseId = newId();
    this.byKey.set(arrival.originKey, { caseId, arrival: structuredClone(arrival) });
    return { caseId, created: true };
  }

  /** The arrivals that opened a case, in order. */
  opened(): NormalisedArrival[] {
    return [...this.byKey.values()].map((v) => v.arrival);
  }
}
