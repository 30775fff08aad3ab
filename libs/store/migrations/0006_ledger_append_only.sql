-- The ledger is append-only in the database, not by convention: UPDATE, DELETE and TRUNCATE of
-- `ledger` are refused for every role, the owner included, by statement-level triggers (SQLSTATE
-- 42501, insufficient_privilege, so callers see a permission failure, never a silent no-op).
-- `ledger_heads` is updated by every append and stays writable; removing a tail row is still
-- detectable through it (verifyLedger: head_mismatch).
-- The only way around the triggers is a superuser session with session_replication_role =
-- replica, which is how the tamper tests simulate an attacker who already owns the database.

CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger is append-only: % refused', TG_OP
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'append a new ledger record instead of changing or removing one';
END;
$$;

CREATE TRIGGER ledger_no_update_delete
  BEFORE UPDATE OR DELETE ON ledger
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER ledger_no_truncate
  BEFORE TRUNCATE ON ledger
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
