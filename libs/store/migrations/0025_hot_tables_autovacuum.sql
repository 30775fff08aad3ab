-- 0025: autovacuum leaves the tables a turn writes alone while they are young (issue 15,
-- half-load latency). Append-only once released.
--
-- An ANALYZE or VACUUM of a table changes its pg_class row, and with it every cached plan that
-- reads the table, on every connection: the next use of each statement plans again. The journal
-- statement reads nine tables and takes 4–6 ms to plan, the case-state derivation 6–10 ms.
-- Autovacuum visits a table once its changes pass 50 rows plus 10 % (ANALYZE) or 1,000 inserts
-- plus 20 % (VACUUM): on a young database every table a turn writes passes it on every visit,
-- and the visits of one pass invalidate the turns' statements one table after another.
-- Measured (`bench:turns` half phase, pg_stat_statements): 70 plans of the journal statement
-- where its 4 connections need 24, and 1.8 s of planning in a 14 s phase; with autovacuum off,
-- the phase's p99 went 32.8 → 23.7, 159 → 70 and 143 → 56 ms (three alternating pairs on a
-- noisy host). With this migration: half the plans and half the planning time of the phase.
--
-- The tables every turn appends to are read by key: the journal statement's generic plan probes
-- their indexes whatever their statistics (libs/store/test/journal-plan.int.test.ts), so a
-- statistic of a young table changes no plan. They wait for 100,000 rows. The small tables the
-- same statements read and update (tasks, cases, ledger_heads) wait for 10,000 changed rows:
-- their updates leave dead rows, mostly pruned on the page by HOT updates, and a vacuum that
-- comes later still comes while they are small. From there the default proportional
-- thresholds (10 %, 20 %) dominate, as they do for every big table. The outbox and the inbox
-- keep the defaults: only cheap statements read them, and they churn.
ALTER TABLE papers SET (autovacuum_analyze_threshold = 100000, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE paper_revisions SET (autovacuum_analyze_threshold = 100000, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE history_blocks SET (autovacuum_analyze_threshold = 100000, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE turn_checkpoints SET (autovacuum_analyze_threshold = 100000, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE cost_ledger SET (autovacuum_analyze_threshold = 100000, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE ledger SET (autovacuum_analyze_threshold = 100000, autovacuum_vacuum_insert_threshold = 100000);
ALTER TABLE runtime_calls SET (autovacuum_analyze_threshold = 100000, autovacuum_vacuum_insert_threshold = 100000, autovacuum_vacuum_threshold = 100000);
ALTER TABLE tasks SET (autovacuum_analyze_threshold = 10000, autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_threshold = 10000);
ALTER TABLE cases SET (autovacuum_analyze_threshold = 10000, autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_threshold = 10000);
ALTER TABLE ledger_heads SET (autovacuum_analyze_threshold = 10000, autovacuum_vacuum_insert_threshold = 10000, autovacuum_vacuum_threshold = 10000);
