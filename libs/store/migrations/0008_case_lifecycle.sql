-- 0008: the case lifecycle (seed 004 §11.1 state table). Append-only: never edit once released.
--
-- cases.state is derived from committed task, gate and dispatch records by ONE statement
-- (libs/store/src/sql/caseState.ts), run in the unit of work of the transition that changes
-- them; every change appends a `case_state` ledger record there too. `state_reason` carries
-- the reason class of a parked case (or why a finished root is not yet resolved);
-- `state_since` is when the case entered its state (the age an operator sees).
ALTER TABLE cases DROP CONSTRAINT cases_state_check;
UPDATE cases SET state = 'opened' WHERE state = 'open';
ALTER TABLE cases ALTER COLUMN state SET DEFAULT 'opened';
ALTER TABLE cases ADD CONSTRAINT cases_state_check
  CHECK (state IN ('opened', 'running', 'parked', 'at_gate', 'held', 'resolved', 'closed', 'cancelled'));
ALTER TABLE cases ADD COLUMN state_reason text;
ALTER TABLE cases ADD COLUMN state_since timestamptz NOT NULL DEFAULT now();
CREATE INDEX cases_state_idx ON cases (state, created_at DESC);
