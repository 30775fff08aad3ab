-- 0012: durable deadlines of questions and gates and their escalation (seed 004 §11, issue 13
-- item 6). Append-only: never edit once released.
--
-- A deadline is an absolute time on the DATABASE clock, fixed once by the reconciler from the
-- case type's `escalation` rule (created_at + afterMs); a later config change never moves it.
-- `escalations` counts the escalations applied (a re-ask moves the deadline once; the next expiry
-- parks for an operator); `escalated_at` is the last one. A gate's `expires_at` stays its hard end.
ALTER TABLE questions
  ADD COLUMN deadline_at  timestamptz,
  ADD COLUMN escalated_at timestamptz,
  ADD COLUMN escalations  int NOT NULL DEFAULT 0 CHECK (escalations >= 0);

ALTER TABLE gates
  ADD COLUMN deadline_at  timestamptz,
  ADD COLUMN escalated_at timestamptz,
  ADD COLUMN escalations  int NOT NULL DEFAULT 0 CHECK (escalations >= 0);

-- The sweep's claim: open items whose deadline passed.
CREATE INDEX questions_deadline_idx ON questions (deadline_at) WHERE answer IS NULL AND deadline_at IS NOT NULL;
CREATE INDEX gates_deadline_idx ON gates (deadline_at) WHERE state = 'open' AND deadline_at IS NOT NULL;
