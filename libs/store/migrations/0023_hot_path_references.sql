-- 0023: no foreign-key checks on the rows every turn writes (issue 15, the cost of a turn's
-- commit). Append-only once released.
--
-- Each inserted row with a foreign key runs a referential check at the end of its statement: a
-- lookup of the referenced row and a KEY SHARE lock on it. A turn inserts about ten such rows.
-- Measured (`npm run bench:turns`): these checks were 18 % of Postgres's CPU per turn at peak
-- and 8 % at half load.
--
-- What keeps these references whole without them:
-- - The journal statement (libs/store/src/sql/journal.ts writeJournals) writes a part only for a
--   task row it has just locked under the part's fence. It inserts each paper with its revision,
--   and inserts every paper a call or checkpoint names in the same statement, before or with the
--   row that names it.
-- - A ledger record is appended only by compare-and-set on its case's head. `ledger_heads` keeps
--   its foreign key to `cases`, so no record exists for a case that does not.
-- - Readers verify what they reassemble. A call or checkpoint whose paper, revision or block is
--   missing is a restore failure: the task parks `restore_failed`, and the worker never fills
--   the gap (seed 004 §2.2).
-- - The crash matrix checks, after killing workers at every journal point, that no reference of
--   these tables dangles (test/turns/crash.test.ts).
--
-- Rows written once per task or case (tasks, ledger_heads, gates, grants, dispatches, …) keep
-- their foreign keys.
ALTER TABLE papers DROP CONSTRAINT papers_case_id_fkey;
ALTER TABLE paper_revisions DROP CONSTRAINT paper_revisions_paper_id_fkey;
ALTER TABLE runtime_calls DROP CONSTRAINT runtime_calls_task_id_fkey;
ALTER TABLE runtime_calls DROP CONSTRAINT runtime_calls_request_paper_id_fkey;
ALTER TABLE runtime_calls DROP CONSTRAINT runtime_calls_response_paper_id_fkey;
ALTER TABLE turn_checkpoints DROP CONSTRAINT turn_checkpoints_task_id_fkey;
ALTER TABLE turn_checkpoints DROP CONSTRAINT turn_checkpoints_state_paper_id_fkey;
ALTER TABLE ledger DROP CONSTRAINT ledger_case_id_fkey;
ALTER TABLE cost_ledger DROP CONSTRAINT cost_ledger_case_id_fkey;
ALTER TABLE cost_ledger DROP CONSTRAINT cost_ledger_task_id_fkey;
ALTER TABLE cost_ledger DROP CONSTRAINT cost_ledger_call_id_fkey;
ALTER TABLE history_blocks DROP CONSTRAINT history_blocks_case_id_fkey;
