-- 0003: effects under authority (issue 5) — what the gate, the execution coordinator and the
-- reconciler keep. Append-only: never edit this file once released.

-- Hard stop is a case-level flag read at dispatch: no new effect starts while it is 'hard';
-- reads and reconciliation of effects already submitted keep running.
ALTER TABLE cases ADD COLUMN stop_mode text CHECK (stop_mode IN ('hard', 'soft'));

-- A gate keeps the exact packet it was opened for (a paper revision, immutable) and what it
-- derived from it. `required_decisions` (0001) holds [{decision, role}], one entry per decision.
ALTER TABLE gates
  ADD COLUMN packet_paper_id  uuid REFERENCES papers(id),
  ADD COLUMN packet_revision  integer,
  ADD COLUMN mutation_key     text,
  ADD COLUMN propose_call_id  uuid,
  ADD COLUMN impact_keys      jsonb NOT NULL DEFAULT '[]'::jsonb,
  ADD COLUMN summary          text,
  ADD COLUMN reason           text,
  -- An open gate has its packet; a gate refused at request time may not (the reason says why).
  ADD CONSTRAINT gates_open_has_packet CHECK (state <> 'open' OR (packet_paper_id IS NOT NULL AND packet_revision IS NOT NULL));
CREATE INDEX gates_case_idx ON gates (case_id);
CREATE INDEX gates_expiry_idx ON gates (expires_at) WHERE state = 'open' AND expires_at IS NOT NULL;

-- A grant belongs to the task whose packet it authorises; at most one grant per gate.
ALTER TABLE grants
  ADD COLUMN task_id        uuid REFERENCES tasks(id),
  ADD COLUMN consumed_at    timestamptz,
  ADD COLUMN revoke_reason  text;
CREATE UNIQUE INDEX grants_one_per_gate_idx ON grants (gate_id) WHERE gate_id IS NOT NULL;
CREATE INDEX grants_expiry_idx ON grants (expires_at) WHERE state = 'issued';

-- An effect call's connector attempt. Attempt n+1 exists only after attempt n was proven not
-- applied by a conclusive WhatLanded; each attempt has its own idempotency key.
ALTER TABLE runtime_calls ADD COLUMN effect_attempt integer CHECK (effect_attempt >= 1);
CREATE INDEX runtime_calls_unknown_effects_idx ON runtime_calls (created_at) WHERE kind = 'effect' AND status IN ('intent', 'unknown');

CREATE INDEX impact_claims_call_idx ON impact_claims (call_id);

-- The coordinator's durable work list: one row per approved grant, driven through
--   pending → executing → settling → settled          (conclusive outcome)
--   pending → executing → reconciling → settling …    (unknown, until WhatLanded is conclusive)
--   reconciling → pending                             (proven not applied: a new attempt)
--   pending → coordination → pending                  (an impact key held by another call)
--   pending → refused                                 (authority or admission failed; no contact)
-- A claim (claimed_by, claimed_until on the DATABASE clock) marks the process working on a row;
-- an 'executing' row whose claim lapsed is never executed again: it goes to reconciliation.
CREATE TABLE effect_dispatches (
  grant_id       uuid PRIMARY KEY REFERENCES grants(id),
  gate_id        uuid NOT NULL REFERENCES gates(id),
  case_id        uuid NOT NULL REFERENCES cases(id),
  task_id        uuid NOT NULL REFERENCES tasks(id),
  state          text NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'coordination', 'executing', 'reconciling', 'settling', 'settled', 'refused')),
  call_id        uuid REFERENCES runtime_calls(id),
  attempt        integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
  -- The impact key a 'coordination' row waits for; released keys wake their waiters.
  waiting_key    text,
  claimed_by     text,
  claimed_until  timestamptz,
  next_at        timestamptz NOT NULL DEFAULT now(),
  -- WhatLanded checks of the current attempt that stayed unknown (the backoff exponent).
  checks         integer NOT NULL DEFAULT 0,
  detail         jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  -- From the intent on, a dispatch names its journal call. A 'settled' dispatch without one
  -- found its mutation journalled already (detail.duplicateOf) and made no call of its own.
  CONSTRAINT effect_dispatches_call_after_intent CHECK (state NOT IN ('executing', 'reconciling', 'settling') OR call_id IS NOT NULL),
  CONSTRAINT effect_dispatches_waiting_iff_coordination CHECK ((state = 'coordination') = (waiting_key IS NOT NULL))
);
CREATE INDEX effect_dispatches_due_idx ON effect_dispatches (next_at) WHERE state IN ('pending', 'executing', 'reconciling', 'settling');
CREATE INDEX effect_dispatches_waiting_idx ON effect_dispatches (waiting_key) WHERE state = 'coordination';
CREATE INDEX effect_dispatches_call_idx ON effect_dispatches (call_id) WHERE call_id IS NOT NULL;
