-- 0020: indexes for the case-state derivation (libs/store/src/sql/caseState.ts).
-- Append-only: never edit once released.
--
-- The derivation runs in the unit of work of every transition that can change a case's state,
-- so each of its lookups must stay an index probe of the one case, never a scan of a table
-- that grows with every case ever run.

-- Held work: the case's grants (issued or reserved, or with a dispatch not settled).
CREATE INDEX grants_case_idx ON grants (case_id);

-- Effect outcomes in doubt or not applied: the effect calls of the case's tasks. Most journal
-- rows are model and tool calls; the partial index holds only effect calls.
CREATE INDEX runtime_calls_effect_task_idx ON runtime_calls (task_id) WHERE kind = 'effect';

-- A refused or lapsed proposed write that a later gate of the same mutation applied: the
-- dispatches of a gate.
CREATE INDEX effect_dispatches_gate_idx ON effect_dispatches (gate_id);

-- Effect assertion checks: the case's `effect_postcheck` records, not its whole chain.
CREATE INDEX ledger_effect_postcheck_idx ON ledger (case_id, seq) WHERE kind = 'effect_postcheck';
