-- 0013: a case's session (seed 004 §11.1, issue 13 item 2): the case's live execution and the ONE
-- principal that operates it. Append-only: never edit once released.
--
-- One row per case, written when a principal first operates the case (the first operator action
-- makes it the controller); a case without a row is live with no controller. Many principals may
-- view; only `controller` operates until a holder of the `operator` role takes over. The history —
-- every state change and handover with from/to/reason — is in the case's ledger
-- (`session_state`, `session_handover`); this row is the current value only. Not tied to a model
-- conversation: a session outlives every turn, task and model route of the case.
CREATE TABLE case_sessions (
  case_id     uuid PRIMARY KEY REFERENCES cases (id),
  state       text NOT NULL CHECK (state IN ('live', 'stopped', 'resumed', 'deleted')),
  controller  text NOT NULL CHECK (length(controller) BETWEEN 1 AND 200),
  since       timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
