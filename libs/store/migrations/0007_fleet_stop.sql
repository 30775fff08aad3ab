-- 0007: the fleet-wide stop (seed 004 §7). Append-only: never edit once released.

-- One row per stop kind, always present, so a stop and a resume are UPDATEs of that row: a
-- dispatch reservation or a checkpoint park that reads the row FOR SHARE serialises with them
-- (a reservation or park committed after a stop saw it; one after a resume saw the resume).
--   hard: no new effect dispatch anywhere (reads and reconciliation go on)
--   soft: no new case, and running work parks at its next checkpoint
CREATE TABLE fleet_stops (
  kind        text PRIMARY KEY CHECK (kind IN ('hard', 'soft')),
  active      boolean NOT NULL DEFAULT false,
  reason      text,
  changed_by  text,
  changed_at  timestamptz,
  CHECK (NOT active OR (reason IS NOT NULL AND changed_by IS NOT NULL AND changed_at IS NOT NULL))
);
INSERT INTO fleet_stops (kind) VALUES ('hard'), ('soft');

-- Who stopped or resumed the fleet, when and why (the fleet has no case ledger of its own).
CREATE TABLE fleet_stop_events (
  seq          bigserial PRIMARY KEY,
  action       text NOT NULL CHECK (action IN ('stop', 'resume')),
  kind         text NOT NULL CHECK (kind IN ('hard', 'soft')),
  reason       text,
  actor        text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);
