-- 0004: intake (issue 6). Append-only: never edit once released; add 0005_… instead.

-- One cursor per monitored mailbox (@everdict/intake-sources MailboxCursor): the mailbox's
-- UIDVALIDITY, the last UID handed to the sink, the newest INTERNALDATE passed (watermark) and
-- the progress of a re-baseline re-scan. Saved only AFTER the sink opened the case, so a crash
-- in between re-delivers a mail the origin key recognises.
CREATE TABLE mailbox_cursors (
  mailbox_key       text PRIMARY KEY,
  uid_validity      bigint NOT NULL CHECK (uid_validity >= 0),
  last_uid          bigint NOT NULL CHECK (last_uid >= 0),
  watermark         text,
  rescan_since      text,
  rescan_through    bigint,
  updated_at        timestamptz NOT NULL DEFAULT now(),
  -- rescan_through NULL = no re-scan in progress; a re-scan's lower bound may itself be NULL.
  CONSTRAINT mailbox_cursors_rescan CHECK (rescan_since IS NULL OR rescan_through IS NOT NULL)
);

-- The case list of an operator or customer reads newest first within a customer.
CREATE INDEX cases_customer_created_idx ON cases (customer, created_at DESC, id DESC);
CREATE INDEX questions_case_idx ON questions (case_id);
