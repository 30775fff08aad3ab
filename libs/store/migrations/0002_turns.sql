-- 0002: durable turns (issue 4) — the task graph, wake-ups, notes, plan confirmations and
-- version decisions the turn-worker needs. Append-only: never edit this file once released.

-- The agent graph is data: every task knows its root, its depth and its ancestry (root first,
-- down to its parent), so a receiver checks a claimed sender against persisted assignments.
-- A child is created at most once per spawn call (spawn_call_id is the idempotency key).
-- `context` is the narrowed execution context a child runs under (envelope, declared tools,
-- permitted papers, grant subset); NULL for a root task, whose context comes from its case type.
ALTER TABLE tasks
  ADD COLUMN root_task_id     uuid REFERENCES tasks(id),
  ADD COLUMN depth            integer NOT NULL DEFAULT 0 CHECK (depth >= 0),
  ADD COLUMN ancestry         uuid[] NOT NULL DEFAULT '{}',
  ADD COLUMN spawn_call_id    uuid UNIQUE,
  ADD COLUMN context          jsonb,
  -- Health-gated backoff of provider_down / connector_down parks: the earliest re-try.
  ADD COLUMN wake_at          timestamptz,
  -- A soft cancel waits for the running turn's checkpoint; a hard cancel fences at once.
  ADD COLUMN cancel_requested text CHECK (cancel_requested IN ('hard', 'soft'));
CREATE INDEX tasks_wake_idx ON tasks (wake_at) WHERE state = 'parked' AND wake_at IS NOT NULL;

-- The versions a checkpoint was taken under (profile, prompt, route, runtime, tool schemas).
ALTER TABLE turn_checkpoints ADD COLUMN versions jsonb NOT NULL DEFAULT '{}'::jsonb;

-- The row version of the submitting task when its revision was committed: a plan.submitted
-- message must match the persisted, immutable revision it claims to carry.
ALTER TABLE plan_revisions ADD COLUMN row_version bigint;

-- A parent's confirmation of a child's plan revision. Revisions stay immutable: the
-- confirmation is its own record, never an edit of the revision (§4).
CREATE TABLE plan_confirmations (
  task_id      uuid NOT NULL,
  revision     integer NOT NULL,
  confirmed_by uuid NOT NULL REFERENCES tasks(id),
  plan_hash    text NOT NULL,
  message_id   uuid,
  confirmed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, revision),
  FOREIGN KEY (task_id, revision) REFERENCES plan_revisions (task_id, revision)
);

-- Who put the question to a human: the root task asks on behalf of the affected task (only the
-- root asks a human, §11.3); NULL when the runtime itself asks an operator.
ALTER TABLE questions ADD COLUMN asked_by uuid REFERENCES tasks(id);
ALTER TABLE questions ADD COLUMN kind text NOT NULL DEFAULT 'agent' CHECK (kind IN ('agent', 'versions'));

-- Notes for a task's next turn: child reports, plan submissions, answers, top-ups. A note is
-- pinned to the turn whose model request first carried it (consumed_turn, written with that
-- turn's intent), so a resumed turn rebuilds exactly the same request.
CREATE TABLE task_notes (
  seq               bigserial PRIMARY KEY,
  task_id           uuid NOT NULL REFERENCES tasks(id),
  kind              text NOT NULL,
  body              jsonb NOT NULL,
  source_message_id uuid,
  consumed_turn     integer,
  created_at        timestamptz NOT NULL DEFAULT now(),
  UNIQUE (task_id, source_message_id)
);
CREATE INDEX task_notes_open_idx ON task_notes (task_id, seq) WHERE consumed_turn IS NULL;

-- A recorded decision to continue a task under changed versions (never silent, §8).
CREATE TABLE version_decisions (
  task_id       uuid NOT NULL REFERENCES tasks(id),
  versions_hash text NOT NULL,
  decision      text NOT NULL CHECK (decision IN ('continue', 'park')),
  decided_by    text NOT NULL,
  changed       jsonb NOT NULL DEFAULT '[]'::jsonb,
  decided_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, versions_hash)
);

-- The provider health signal that gates provider_down wake-ups.
CREATE TABLE route_health (
  route           text PRIMARY KEY,
  last_ok_at      timestamptz,
  last_failure_at timestamptz
);

-- Every turn stores its exact request and response bytes; compress them with lz4 where the
-- server supports it (far less CPU than the default pglz). A server without lz4 keeps pglz.
DO $$
BEGIN
  ALTER TABLE paper_revisions ALTER COLUMN bytes SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
  NULL;
END
$$;
