-- 0024: no NOTIFY from a ledger insert (issue 15, half-load latency). Append-only once released.
--
-- Migration 0017's trigger sent `NOTIFY everdict_ledger` for every ledger row, so every turn's
-- commit NOTIFYed (each turn appends a `turn` record). Postgres serialises all committing
-- transactions that NOTIFY, across every database of the cluster, on one lock held from before
-- the commit record until the WAL flush has returned: the turns' group-commit statements waited
-- on each other's flushes (pg_stat_activity at half load: Lock:object on the pg_database lock
-- in a fifth of the active backends' samples).
--
-- The live ledger stream's wake-up is a reference, never the record, so a process serving
-- streams now watches `ledger_heads` of the cases its streams follow instead (services/intake
-- ledgerStream.ts: one indexed read per poll, only while a stream is open). Writers pay nothing.
DROP TRIGGER ledger_notify_after_insert ON ledger;
DROP FUNCTION ledger_notify_append();
