-- 0014: per-case caps (issue 13 item 5, seed 004 §11.5). Append-only: never edit once released.

-- A task waits for a per-case cap (a case type's caps.workerSlots) with park reason `capacity`:
-- a backoff timer retries its claim; contracts' PARK_CLASSES say what wakes it.
ALTER TABLE tasks DROP CONSTRAINT tasks_park_reason_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_park_reason_check
  CHECK (park_reason IN ('question', 'gate', 'sub_case', 'connector_down', 'provider_down', 'budget', 'capability_gap', 'children', 'consent', 'capacity'));


-- Each external call (a connector read) a case with caps.externalCallsPerMinute started, on the
-- database clock: the rate window counts these rows. Rows older than the window are pruned by
-- the admission that follows them; nothing else reads them.
CREATE TABLE case_external_calls (
  case_id  uuid NOT NULL REFERENCES cases (id),
  task_id  uuid NOT NULL,
  call_id  text NOT NULL CHECK (length(call_id) BETWEEN 1 AND 200),
  at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX case_external_calls_window_idx ON case_external_calls (case_id, at);
