-- 0015: telling the customer and the customer's close (seed 004 §11.1, §11.3; issue 13 items 1, 3).
-- Append-only: never edit once released.
--
-- One row per root task whose result was delivered to the customer through the case's arrival
-- channel (a reply mail, a ticket comment, a notification stored for the case view), written in
-- the unit of work that records the delivery (with its `customer_told` ledger record). A case
-- whose current root is done and verified is `resolved` only once its root has a row here;
-- before that it is parked with the reason `telling_customer`. A reopened case has a new root,
-- so it is told again.
CREATE TABLE customer_notifications (
  id            uuid PRIMARY KEY,
  case_id       uuid NOT NULL REFERENCES cases(id),
  root_task_id  uuid NOT NULL UNIQUE REFERENCES tasks(id),
  channel       text NOT NULL CHECK (channel IN ('mail', 'webhook', 'stored')),
  -- The delivered message's identity on its channel: a mail's Message-ID (no brackets), the
  -- comment's idempotency key for a webhook, the notification's own id for a stored one.
  message_id    text NOT NULL,
  text          text NOT NULL,
  delivered_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX customer_notifications_case_idx ON customer_notifications (case_id, delivered_at);

-- The customer's close (only the customer closes a case, never the platform); cleared when a
-- reply reopens the case.
ALTER TABLE cases ADD COLUMN closed_at timestamptz;
ALTER TABLE cases ADD COLUMN closed_by text;

-- A reply to a resolved or closed case reopens it (services/intake/src/threading.ts).
ALTER TABLE case_inputs DROP CONSTRAINT case_inputs_applied_as_check;
ALTER TABLE case_inputs ADD CONSTRAINT case_inputs_applied_as_check CHECK (applied_as IN ('opened', 'answered', 'appended', 'reopened'));
