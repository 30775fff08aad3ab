-- 0016: concurrent per-case caps (issue 13 item 5) and closing through the channel (issue 13 item 1). Append-only: never edit once released.

-- One row per concurrent use a capped case holds right now: a model call in flight
-- (cap `modelCalls`, target '') or a session open on an estate target (cap `estateSessions`,
-- target `system/environment[/account]`). A hold counts only while the task that took it still
-- holds the lease it took it under (same fence epoch, lease not ended, on the database clock),
-- so a worker that dies mid-call stops counting when its lease ends; its row is dropped by the
-- next admission of the same case, cap and target. Nothing else reads these rows.
CREATE TABLE case_cap_holds (
  cap          text NOT NULL CHECK (cap IN ('modelCalls', 'estateSessions')),
  holder       text NOT NULL CHECK (length(holder) BETWEEN 1 AND 300),
  case_id      uuid NOT NULL,
  target       text NOT NULL DEFAULT '' CHECK (length(target) <= 400),
  task_id      uuid NOT NULL,
  fence_epoch  bigint NOT NULL,
  acquired_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (cap, holder)
);
CREATE INDEX case_cap_holds_count_idx ON case_cap_holds (case_id, cap, target);

-- A customer's confirmation through the channel (a reply mail whose first line is CLOSE, a
-- ticket webhook whose event says closed) closes a resolved case: the input is recorded as
-- applied `closed` (services/intake/src/threading.ts), so a redelivery closes nothing twice.
ALTER TABLE case_inputs DROP CONSTRAINT case_inputs_applied_as_check;
ALTER TABLE case_inputs ADD CONSTRAINT case_inputs_applied_as_check CHECK (applied_as IN ('opened', 'answered', 'appended', 'reopened', 'closed'));
