/**
 * Scheduled case types: several replicas firing the same slots at once open exactly one case
 * per slot (origin key `schedule:<case type>:<slot ISO>`), each with one root task and one
 * task.runnable; a later overlapping window opens nothing again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fireDueSlots, parseCron } from '@everdict/intake';
import { Store, createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { freshDatabase } from '@everdict/testkit';
import { count, fleetConfig } from './helpers.js';

let db: Db;
let drop: () => Promise<void>;

beforeAll(async () => {
  const database = await freshDatabase('intake-schedule');
  drop = database.drop;
  db = createPgDb(database.url, { max: 8 });
  await migrate(db);
});
afterAll(async () => {
  await db?.close();
  await drop?.();
});

describe('scheduled case types', () => {
  it('opens one case per slot however many replicas fire it', async () => {
    const schedules = [{ schedule: { caseType: 'plain', cron: '*/10 * * * *', customer: 'acme', title: 'Audit' }, cron: parseCron('*/10 * * * *') }];
    const after = new Date('2026-11-29T10:00:00Z');
    const through = new Date('2026-11-29T11:00:00Z');
    // Four replicas, each with its own store (pool), firing the same hour at once.
    const created = await Promise.all(Array.from({ length: 4 }, () => fireDueSlots(new Store(db), fleetConfig(), schedules, after, through)));
    expect(created.reduce((a, b) => a + b, 0)).toBe(6);
    expect(await count(db, "SELECT 1 FROM cases WHERE origin_key LIKE 'schedule:plain:%'")).toBe(6);
    expect(await count(db, "SELECT 1 FROM cases WHERE origin_key = 'schedule:plain:2026-11-29T10:10:00.000Z' AND title = 'Audit 2026-11-29T10:10:00.000Z'")).toBe(1);
    expect(await count(db, "SELECT 1 FROM tasks t JOIN cases c ON c.id = t.case_id WHERE c.origin_key LIKE 'schedule:%'")).toBe(6);
    expect(await count(db, "SELECT 1 FROM outbox_messages WHERE type = 'task.runnable'")).toBe(6);
    // An overlapping window (a replica that restarted and caught up) opens only the new slot.
    expect(await fireDueSlots(new Store(db), fleetConfig(), schedules, new Date('2026-11-29T10:30:00Z'), new Date('2026-11-29T11:10:00Z'))).toBe(1);
  });
});
