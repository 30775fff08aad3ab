/**
 * The mailbox cursor and the pure decisions over it: where a monitor resumes, which UIDs it
 * ingests, how the cursor advances.
 *
 * Invariant: every UID <= `lastUid` under `uidValidity` has been acknowledged by the
 * ArrivalSink (or deliberately passed over, see below). The cursor only moves after the sink
 * resolved, so a crash in between re-delivers that one mail to the sink, which dedups it by
 * origin key; nothing is lost and no case is opened twice.
 *
 * Re-baseline (UIDVALIDITY changed, or the server's UIDNEXT fell to or below our cursor, which
 * only a broken server does): the old UIDs mean nothing any more, so the monitor starts again at
 * UID 1 under the new UIDVALIDITY and re-scans the messages that were in the mailbox at that
 * moment — but only those whose INTERNALDATE is on or after the watermark (the newest
 * INTERNALDATE the old cursor had passed, or the instant of the first baseline) minus
 * `rescanMarginMs`. Older messages were either ingested already or left out on purpose by
 * `startAt: 'new'`. Every re-scanned mail goes to the sink again and is recognised by its
 * Message-ID origin key (origin-key.ts), so no duplicate case opens; mails that arrived while
 * the monitor was away are ingested. Messages that arrive after the re-baseline (UID above
 * `rescan.throughUid`) are new arrivals and always ingested, whatever their INTERNALDATE (a
 * user moving an old mail into the folder keeps its old INTERNALDATE).
 */

export interface MailboxCursor {
  uidValidity: number;
  /** Every UID up to and including this one is done under `uidValidity`. */
  lastUid: number;
  /**
   * ISO-8601: the newest INTERNALDATE this cursor has passed, or when it was first baselined.
   * The lower bound of a re-baseline's re-scan; null = re-scan everything.
   */
  watermark: string | null;
  /** Set while a re-baseline's re-scan is in progress (survives restarts). */
  rescan: MailboxRescan | null;
}

export interface MailboxRescan {
  /** ISO-8601 lower bound on INTERNALDATE for UIDs <= throughUid; null = all of them. */
  since: string | null;
  /** The highest UID that existed when the re-baseline happened. */
  throughUid: number;
}

/**
 * Port to where intake keeps cursors (a table written by the intake service). `save` replaces
 * the cursor of `mailboxKey`. Keys come from `mailboxKey(account, mailbox)`.
 */
export interface MailboxCursorStore {
  load(mailboxKey: string): Promise<MailboxCursor | null>;
  save(mailboxKey: string, cursor: MailboxCursor): Promise<void>;
}

/** What a mailbox looks like right after SELECT/EXAMINE. */
export interface SelectedMailbox {
  uidValidity: number;
  uidNext: number;
}

/** Where a never-seen mailbox starts: only mail arriving from now on, or everything in it. */
export type StartAt = 'new' | 'all';

type ResumeDecision =
  | { kind: 'continue'; cursor: MailboxCursor }
  | { kind: 'baseline'; cursor: MailboxCursor }
  | { kind: 'rebaseline'; reason: 'uidvalidity_changed' | 'uid_regressed'; previous: MailboxCursor; cursor: MailboxCursor };

/** Decides how a session resumes after selecting the mailbox. Pure. */
export function planResume(stored: MailboxCursor | null, selected: SelectedMailbox, opts: { startAt: StartAt; rescanMarginMs: number; now: Date }): ResumeDecision {
  const highestExisting = Math.max(0, selected.uidNext - 1);
  if (stored === null) {
    return opts.startAt === 'new'
      ? { kind: 'baseline', cursor: { uidValidity: selected.uidValidity, lastUid: highestExisting, watermark: opts.now.toISOString(), rescan: null } }
      : { kind: 'baseline', cursor: { uidValidity: selected.uidValidity, lastUid: 0, watermark: null, rescan: null } };
  }
  const sameEpoch = stored.uidValidity === selected.uidValidity;
  // UIDNEXT never decreases under one UIDVALIDITY (RFC 3501 §2.3.1.1); if it did, our UIDs are stale.
  if (sameEpoch && stored.lastUid < selected.uidNext) return { kind: 'continue', cursor: stored };
  const since = stored.watermark === null ? null : new Date(Date.parse(stored.watermark) - opts.rescanMarginMs).toISOString();
  return {
    kind: 'rebaseline',
    reason: sameEpoch ? 'uid_regressed' : 'uidvalidity_changed',
    previous: stored,
    cursor: {
      uidValidity: selected.uidValidity,
      lastUid: 0,
      watermark: stored.watermark,
      rescan: highestExisting > 0 ? { since, throughUid: highestExisting } : null,
    },
  };
}

type UidAction = { uid: number; action: 'ingest' | 'pass' };

/**
 * Which of the UIDs found above the cursor are ingested and which are passed over. Pure.
 * `eligibleOld` is the set of re-scan UIDs (<= rescan.throughUid) whose INTERNALDATE is on or
 * after `rescan.since`; it is only consulted while a re-scan with a `since` bound is active.
 */
export function selectUids(found: readonly number[], cursor: MailboxCursor, eligibleOld: ReadonlySet<number> | null): UidAction[] {
  const fresh = [...new Set(found)].filter((uid) => uid > cursor.lastUid).sort((a, b) => a - b);
  const rescan = cursor.rescan;
  return fresh.map((uid) => {
    if (rescan === null || rescan.since === null || uid > rescan.throughUid) return { uid, action: 'ingest' as const };
    return { uid, action: eligibleOld?.has(uid) ? ('ingest' as const) : ('pass' as const) };
  });
}

/** The cursor after `uid` is done (acknowledged by the sink, or passed over). Pure. */
export function advanceCursor(cursor: MailboxCursor, uid: number, internalDate: Date | null): MailboxCursor {
  if (uid <= cursor.lastUid) return cursor;
  let watermark = cursor.watermark;
  if (internalDate !== null && !Number.isNaN(internalDate.getTime())) {
    const iso = internalDate.toISOString();
    if (watermark === null || Date.parse(iso) > Date.parse(watermark)) watermark = iso;
  }
  const rescan = cursor.rescan !== null && uid >= cursor.rescan.throughUid ? null : cursor.rescan;
  return { uidValidity: cursor.uidValidity, lastUid: uid, watermark, rescan };
}

/** In-memory cursor store, for tests and single-process demos. Copies on the way in and out. */
export class InMemoryCursorStore implements MailboxCursorStore {
  private readonly cursors = new Map<string, MailboxCursor>();

  async load(mailboxKey: string): Promise<MailboxCursor | null> {
    const c = this.cursors.get(mailboxKey);
    return c === undefined ? null : structuredClone(c);
  }

  async save(mailboxKey: string, cursor: MailboxCursor): Promise<void> {
    this.cursors.set(mailboxKey, structuredClone(cursor));
  }
}
