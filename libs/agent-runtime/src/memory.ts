/**
 * In-memory implementations of the ports, for tests and the kernel's own examples. They keep
 * the same invariants the durable implementations must keep (see ports.ts), so a test against
 * them is a test of the kernel's use of the contract.
 */
import { EverdictError, manualClock } from '@everdict/contracts';
import type { CallIntent, CallOutcome, CallRecord, Journal, JournalKey, KernelClock, PermissionDecision, PermissionHook, PermissionRequest, ResultPage, ResultStore } from './ports.js';

const keyOf = (k: JournalKey) => `${k.taskId}\u0000${k.turn}\u0000${k.ordinal}`;

export class InMemoryJournal implements Journal {
  private readonly records = new Map<string, CallRecord>();

  async recordIntent(intent: CallIntent): Promise<CallRecord> {
    const existing = this.records.get(keyOf(intent));
    if (existing !== undefined) return existing;
    const rec: CallRecord = { ...intent, status: 'intent', response: null, responseHash: null };
    this.records.set(keyOf(intent), rec);
    return rec;
  }

  async recordOutcome(key: JournalKey & { callId: string }, outcome: CallOutcome): Promise<void> {
    const rec = this.records.get(keyOf(key));
    if (rec === undefined || rec.callId !== key.callId) throw new EverdictError('journal_unknown_call', `no intent for call ${key.callId}`, { details: { callId: key.callId } });
    if (rec.status !== 'intent') {
      // A failed model call produced no response: asking again may record a new outcome.
      const retryableModel = rec.kind === 'model' && rec.status === 'failed';
      if (!retryableModel) {
        if (rec.status === outcome.status && rec.responseHash === outcome.responseHash) return;
        throw new EverdictError('journal_outcome_conflict', `call ${key.callId} already settled as ${rec.status}`, { details: { callId: key.callId } });
      }
    }
    this.records.set(keyOf(key), { ...rec, status: outcome.status, response: outcome.response, responseHash: outcome.responseHash });
  }

  async recordWithheld(intent: CallIntent, outcome: CallOutcome): Promise<CallRecord> {
    const existing = this.records.get(keyOf(intent));
    if (existing !== undefined) return existing;
    const rec: CallRecord = { ...intent, status: outcome.status, response: outcome.response, responseHash: outcome.responseHash };
    this.records.set(keyOf(intent), rec);
    return rec;
  }

  /** All records in journal order (task, turn, ordinal). */
  all(): CallRecord[] {
    return [...this.records.values()].sort((a, b) => a.taskId.localeCompare(b.taskId) || a.turn - b.turn || a.ordinal - b.ordinal);
  }

  get(key: JournalKey): CallRecord | undefined {
    return this.records.get(keyOf(key));
  }

  /** Simulates a crash between an intent and its outcome by dropping the outcome. */
  forgetOutcome(key: JournalKey): void {
    const rec = this.records.get(keyOf(key));
    if (rec !== undefined) this.records.set(keyOf(key), { ...rec, status: 'intent', response: null, responseHash: null });
  }

  delete(key: JournalKey): void {
    this.records.delete(keyOf(key));
  }
}

export class InMemoryResultStore implements ResultStore {
  private readonly results = new Map<string, { taskId: string; content: string }>();

  async put(owner: { taskId: string; callId: string }, content: string): Promise<string> {
    const ref = `result:${owner.callId}`;
    this.results.set(ref, { taskId: owner.taskId, content });
    return ref;
  }

  async read(taskId: string, ref: string, offset: number, limit: number): Promise<ResultPage | null> {
    const stored = this.results.get(ref);
    if (stored === undefined || stored.taskId !== taskId) return null;
    const total = stored.content.length;
    const start = Math.min(Math.max(0, offset), total);
    const end = Math.min(total, start + Math.max(1, limit));
    return { text: stored.content.slice(start, end), offset: start, total, nextOffset: end < total ? end : null };
  }
}

/** A manual clock whose `sleep` advances time instead of waiting; records each sleep. */
export function testKernelClock(start = '2026-01-01T00:00:00Z'): KernelClock & { advance(ms: number): void; readonly sleeps: number[] } {
  const clock = manualClock(start);
  const sleeps: number[] = [];
  return {
    now: () => clock.now(),
    advance: (ms) => clock.advance(ms),
    sleeps,
    async sleep(ms) {
      sleeps.push(ms);
      clock.advance(ms);
    },
  };
}

/** A permission hook that answers from a function and records every request it saw. */
export function recordingPermissionHook(answer: (req: PermissionRequest) => PermissionDecision = () => ({ decision: 'allow' })): PermissionHook & { readonly requests: PermissionRequest[] } {
  const requests: PermissionRequest[] = [];
  return {
    requests,
    async request(req) {
      requests.push(req);
      return answer(req);
    },
  };
}
