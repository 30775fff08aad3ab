-- 0017: operator console sign-in and the live ledger (issue 14 item 1). Append-only once released.
--
-- web_sessions: a bearer token exchanged for a browser session (POST /v1/session). Only hashes are
-- stored: `id_hash` is sha256 of the random cookie value and `csrf_hash` sha256 of the random CSRF
-- token, so a read of this table signs nobody in. `principal` names a fleet-config principal; its
-- roles and customers are read from the current config at every request (a principal removed or
-- narrowed in the config takes effect on its open sessions at once). A session is valid while
-- `revoked_at IS NULL AND expires_at > now()` on the database clock.
CREATE TABLE web_sessions (
  id_hash     text PRIMARY KEY CHECK (id_hash ~ '^sha256:[0-9a-f]{64}$'),
  principal   text NOT NULL CHECK (length(principal) BETWEEN 1 AND 200),
  csrf_hash   text NOT NULL CHECK (csrf_hash ~ '^sha256:[0-9a-f]{64}$'),
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  revoked_at  timestamptz,
  CHECK (expires_at > created_at)
);
CREATE INDEX web_sessions_expiry_idx ON web_sessions (expires_at) WHERE revoked_at IS NULL;

-- Every committed ledger row is announced on `everdict_ledger` with its case id as payload, so a
-- live ledger stream wakes at COMMIT instead of on its poll (Postgres delivers NOTIFY only at
-- commit and folds identical payloads of one transaction into one). The notification is a
-- reference, never the record: listeners read `seq > last sent` from the table.
CREATE FUNCTION ledger_notify_append() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('everdict_ledger', NEW.case_id::text);
  RETURN NULL;
END;
$$;

CREATE TRIGGER ledger_notify_after_insert
  AFTER INSERT ON ledger
  FOR EACH ROW EXECUTE FUNCTION ledger_notify_append();
