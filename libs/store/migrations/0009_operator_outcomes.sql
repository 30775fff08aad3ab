-- 0009: outcomes a human records for an effect call in doubt (seed 004 §7). Append-only: never
-- edit once released.

-- One row per recording. The call's own row carries the outcome only when it is conclusive
-- (applied / not_applied: the settle path releases impact keys and wakes the task); a
-- partly_applied recording leaves the call unknown with its keys held, and the reconciler stops
-- asking the target and leaves the call to an operator.
CREATE TABLE effect_operator_outcomes (
  id              uuid PRIMARY KEY,
  call_id         uuid NOT NULL REFERENCES runtime_calls (id),
  case_id         uuid NOT NULL,
  attempt         integer NOT NULL CHECK (attempt >= 1),
  outcome         text NOT NULL CHECK (outcome IN ('applied', 'not_applied', 'partly_applied')),
  principal       text NOT NULL,
  evidence        text NOT NULL CHECK (length(evidence) BETWEEN 1 AND 4000),
  proof_paper_id  uuid,
  recorded_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX effect_operator_outcomes_call_idx ON effect_operator_outcomes (call_id, attempt);
