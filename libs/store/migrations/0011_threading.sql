-- 0011: threading (issue 13 item 3). Append-only: never edit once released.

-- Every arrival a case took in, keyed by its INPUT key (the arrival's identity as one input:
-- a mail's origin key, a webhook's origin key with its body hash), so a redelivered input is
-- recognised and applied once, however many replicas see it. The opening arrival is one too.
CREATE TABLE case_inputs (
  input_key    text PRIMARY KEY,
  case_id      uuid NOT NULL REFERENCES cases(id),
  origin_key   text NOT NULL,
  source       text NOT NULL CHECK (source IN ('mailbox', 'webhook', 'api', 'schedule')),
  -- opened: it opened the case · answered: it answered the case's open question ·
  -- appended: new material for the root task
  applied_as   text NOT NULL CHECK (applied_as IN ('opened', 'answered', 'appended')),
  question_id  uuid REFERENCES questions(id),
  created_at   timestamptz NOT NULL DEFAULT now(),
  CHECK ((applied_as = 'answered') = (question_id IS NOT NULL))
);
CREATE INDEX case_inputs_case_idx ON case_inputs (case_id, created_at);

-- Message-IDs (without angle brackets) that belong to a case's mail thread: the mails it took
-- in and, once the platform sends mail, the notifications it sent. A reply naming one in
-- In-Reply-To or References threads into that case. The first case to record an id keeps it.
CREATE TABLE case_message_ids (
  message_id   text PRIMARY KEY,
  case_id      uuid NOT NULL REFERENCES cases(id),
  direction    text NOT NULL CHECK (direction IN ('received', 'sent')),
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX case_message_ids_case_idx ON case_message_ids (case_id);
