-- 0001: the durable tables of DESIGN §4. Append-only: never edit this file once released;
-- add 0002_… instead. Double-brace placeholders are rendered from the constants in
-- @everdict/contracts (states.ts) so the CHECK lists and the code share one source.

CREATE TABLE cases (
  id            uuid PRIMARY KEY,
  case_type     text NOT NULL,
  state         text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'running', 'resolved', 'closed', 'cancelled')),
  origin_key    text NOT NULL UNIQUE,
  customer      text NOT NULL,
  title         text NOT NULL DEFAULT '',
  objective     jsonb NOT NULL DEFAULT '{}'::jsonb,
  scope         jsonb NOT NULL DEFAULT '{}'::jsonb,
  row_version   bigint NOT NULL DEFAULT 0,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tasks (
  id                   uuid PRIMARY KEY,
  case_id              uuid NOT NULL REFERENCES cases(id),
  parent_id            uuid REFERENCES tasks(id),
  profile              text NOT NULL,
  profile_version      text NOT NULL DEFAULT '1',
  objective            jsonb NOT NULL DEFAULT '{}'::jsonb,
  state                text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'running', 'parked', 'done', 'failed', 'cancelled')),
  park_reason          text CHECK (park_reason IN ('question', 'gate', 'sub_case', 'connector_down', 'provider_down', 'budget', 'capability_gap', 'children')),
  park_detail          jsonb,
  parked_at            timestamptz,
  row_version          bigint NOT NULL DEFAULT 0,
  fence_epoch          bigint NOT NULL DEFAULT 0,
  lease_owner          text,
  lease_until          timestamptz,
  budget_limit_minutes numeric,
  budget_used_minutes  numeric NOT NULL DEFAULT 0,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  -- A parked task names exactly one reason class; no other state carries one.
  CONSTRAINT tasks_park_reason_iff_parked CHECK ((state = 'parked') = (park_reason IS NOT NULL))
);
CREATE INDEX tasks_case_idx ON tasks (case_id);
CREATE INDEX tasks_parent_idx ON tasks (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX tasks_lease_idx ON tasks (lease_until) WHERE state = 'running';

-- Papers: named, revisioned, content-addressed bytes with a schema id. Revisions are immutable.
CREATE TABLE papers (
  id            uuid PRIMARY KEY,
  case_id       uuid NOT NULL REFERENCES cases(id),
  kind          text NOT NULL,
  name          text NOT NULL,
  head_revision integer NOT NULL DEFAULT 0,
  created_at    timestamptz NOT NULL DEFAULT now(),
  UNIQUE (case_id, name)
);

CREATE TABLE paper_revisions (
  paper_id     uuid NOT NULL REFERENCES papers(id),
  revision     integer NOT NULL CHECK (revision >= 1),
  schema_id    text NOT NULL,
  content_hash text NOT NULL,
  size_bytes   integer NOT NULL,
  bytes        bytea NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (paper_id, revision)
);

-- The durable operation journal: one row per model or tool call, ids allocated before dispatch.
CREATE TABLE runtime_calls (
  id                uuid PRIMARY KEY,
  task_id           uuid NOT NULL REFERENCES tasks(id),
  turn              integer NOT NULL CHECK (turn >= 0),
  ordinal           integer NOT NULL CHECK (ordinal >= 0),
  kind              text NOT NULL CHECK (kind IN ('model', 'read', 'control', 'effect')),
  tool_name         text,
  status            text NOT NULL CHECK (status IN ('intent', 'completed', 'failed', 'unknown', 'refused', 'shadowed')),
  fence_epoch       bigint NOT NULL,
  request_paper_id  uuid REFERENCES papers(id),
  request_hash      text,
  response_paper_id uuid REFERENCES papers(id),
  response_hash     text,
  logical_key       text,
  route             text,
  versions          jsonb NOT NULL DEFAULT '{}'::jsonb,
  outcome_class     text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  completed_at      timestamptz,
  UNIQUE (task_id, turn, ordinal)
);
CREATE UNIQUE INDEX runtime_calls_logical_key_idx ON runtime_calls (logical_key) WHERE logical_key IS NOT NULL;

CREATE TABLE turn_checkpoints (
  task_id        uuid NOT NULL REFERENCES tasks(id),
  turn           integer NOT NULL CHECK (turn >= 0),
  state_paper_id uuid NOT NULL REFERENCES papers(id),
  state_hash     text NOT NULL,
  context_hash   text,
  fence_epoch    bigint NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, turn)
);

-- Inbox: one row per (consumer, message id), written in the same transaction as the effect.
CREATE TABLE inbox_messages (
  consumer     text NOT NULL,
  message_id   uuid NOT NULL,
  payload_hash text NOT NULL,
  type         text NOT NULL,
  disposition  text NOT NULL CHECK (disposition IN ('applied', 'ignored', 'refused')),
  received_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer, message_id)
);

-- What the edge refused: kept so an operator can see why a message was dead-lettered.
CREATE TABLE dead_letters (
  seq          bigserial PRIMARY KEY,
  consumer     text NOT NULL,
  message_id   text,
  type         text,
  reason       text NOT NULL,
  detail       text NOT NULL DEFAULT '',
  payload_hash text,
  recorded_at  timestamptz NOT NULL DEFAULT now()
);

-- Outbox: committed with the state change; a relay publishes and marks after the confirm.
CREATE TABLE outbox_messages (
  seq           bigserial PRIMARY KEY,
  message_id    uuid NOT NULL UNIQUE,
  type          text NOT NULL,
  routing_key   text NOT NULL,
  case_id       uuid,
  body          bytea NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  claimed_by    text,
  claimed_until timestamptz,
  attempts      integer NOT NULL DEFAULT 0,
  published_at  timestamptz
);
CREATE INDEX outbox_unpublished_idx ON outbox_messages (seq) WHERE published_at IS NULL;

-- Ledger: append-only, hash-chained per case. The head row makes a removed tail detectable.
CREATE TABLE ledger (
  case_id    uuid NOT NULL REFERENCES cases(id),
  seq        bigint NOT NULL CHECK (seq >= 1),
  record_id  uuid NOT NULL UNIQUE,
  kind       text NOT NULL,
  body       jsonb NOT NULL,
  prev_hash  text NOT NULL,
  hash       text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (case_id, seq)
);

CREATE TABLE ledger_heads (
  case_id uuid PRIMARY KEY REFERENCES cases(id),
  seq     bigint NOT NULL,
  hash    text NOT NULL
);

-- Plans: revisions are immutable; steps are a projection over them.
CREATE TABLE plan_revisions (
  task_id           uuid NOT NULL REFERENCES tasks(id),
  revision          integer NOT NULL CHECK (revision >= 1),
  expected_revision integer NOT NULL CHECK (expected_revision >= 0),
  plan_hash         text NOT NULL,
  paper_id          uuid REFERENCES papers(id),
  steps             jsonb NOT NULL,
  submitted_by      uuid REFERENCES tasks(id),
  created_at        timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, revision),
  CONSTRAINT plan_revisions_in_order CHECK (expected_revision = revision - 1)
);

CREATE TABLE plan_steps (
  task_id    uuid NOT NULL REFERENCES tasks(id),
  step_id    text NOT NULL,
  revision   integer NOT NULL,
  title      text NOT NULL DEFAULT '',
  depends_on jsonb NOT NULL DEFAULT '[]'::jsonb,
  status     text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active', 'done', 'waiting', 'dropped')),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, step_id)
);

CREATE TABLE questions (
  id              uuid PRIMARY KEY,
  case_id         uuid NOT NULL REFERENCES cases(id),
  task_id         uuid NOT NULL REFERENCES tasks(id),
  gap             text NOT NULL,
  checked         jsonb NOT NULL DEFAULT '[]'::jsonb,
  depends_on      jsonb NOT NULL DEFAULT '[]'::jsonb,
  alternatives    jsonb NOT NULL DEFAULT '[]'::jsonb,
  decision_needed text NOT NULL,
  answer          text,
  answered_by     text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  answered_at     timestamptz
);
CREATE INDEX questions_open_idx ON questions (case_id) WHERE answer IS NULL;

CREATE TABLE gates (
  id                 uuid PRIMARY KEY,
  case_id            uuid NOT NULL REFERENCES cases(id),
  task_id            uuid NOT NULL REFERENCES tasks(id),
  packet_digest      text NOT NULL,
  operation          text NOT NULL,
  effect_class       text NOT NULL,
  required_decisions jsonb NOT NULL DEFAULT '[]'::jsonb,
  state              text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'approved', 'rejected', 'expired', 'revoked')),
  expires_at         timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now(),
  decided_at         timestamptz
);
CREATE INDEX gates_open_idx ON gates (created_at) WHERE state = 'open';

-- One row per decision per principal, each bound to the digest it was given for.
CREATE TABLE decisions (
  id         uuid PRIMARY KEY,
  gate_id    uuid NOT NULL REFERENCES gates(id),
  decision   text NOT NULL,
  verdict    text NOT NULL CHECK (verdict IN ('approve', 'reject')),
  principal  text NOT NULL,
  role       text NOT NULL,
  digest     text NOT NULL,
  reason     text,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (gate_id, decision)
);

-- A grant is bound to one packet digest and reserved by exactly one journal call.
CREATE TABLE grants (
  id                uuid PRIMARY KEY,
  case_id           uuid NOT NULL REFERENCES cases(id),
  gate_id           uuid REFERENCES gates(id),
  packet_digest     text NOT NULL,
  state             text NOT NULL DEFAULT 'issued' CHECK (state IN ('issued', 'reserved', 'consumed', 'expired', 'revoked')),
  reserved_call_id  uuid UNIQUE REFERENCES runtime_calls(id),
  issued_at         timestamptz NOT NULL DEFAULT now(),
  expires_at        timestamptz NOT NULL,
  revoked_at        timestamptz,
  CONSTRAINT grants_reserved_has_call CHECK ((state IN ('reserved', 'consumed')) = (reserved_call_id IS NOT NULL))
);

-- One live holder per impact key; a key is released only on a conclusive outcome.
CREATE TABLE impact_claims (
  impact_key  text PRIMARY KEY,
  case_id     uuid NOT NULL REFERENCES cases(id),
  task_id     uuid NOT NULL REFERENCES tasks(id),
  call_id     uuid,
  claimed_at  timestamptz NOT NULL DEFAULT now()
);

-- Provider calls only (§11.5); unknown usage stays NULL, never 0.
CREATE TABLE cost_ledger (
  id            uuid PRIMARY KEY,
  case_id       uuid NOT NULL REFERENCES cases(id),
  task_id       uuid REFERENCES tasks(id),
  call_id       uuid REFERENCES runtime_calls(id),
  route         text NOT NULL,
  model         text NOT NULL,
  input_tokens  integer,
  output_tokens integer,
  cost          numeric,
  recorded_at   timestamptz NOT NULL DEFAULT now()
);
