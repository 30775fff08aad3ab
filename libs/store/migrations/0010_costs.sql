-- Costs and budgets (seed 004 §8, §11.5).
--
-- `cost_ledger` holds one row per answered model call, written by the same statement that
-- records the call's response (writeJournals): tokens and cost as the provider measured them;
-- a value the provider did not report stays NULL (unknown), never 0.
CREATE UNIQUE INDEX cost_ledger_call_idx ON cost_ledger (call_id) WHERE call_id IS NOT NULL;
CREATE INDEX cost_ledger_case_idx ON cost_ledger (case_id);

-- Delivery time, measured on the database clock at every state change of a task, whichever
-- statement makes it (a turn's release, a park, a lease expiry, a cancel): the time a task
-- spent `running` (claim → release/park/finish) is charged to `budget_used_minutes`; the time
-- it spent `parked` is counted apart in `waiting_minutes` and never charged to the budget.
ALTER TABLE tasks
  ADD COLUMN running_since timestamptz,
  ADD COLUMN waiting_minutes numeric NOT NULL DEFAULT 0;

CREATE FUNCTION tasks_charge_minutes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.state = 'running' AND OLD.running_since IS NOT NULL THEN
    NEW.budget_used_minutes := OLD.budget_used_minutes + extract(epoch FROM now() - OLD.running_since) / 60;
  END IF;
  IF OLD.state = 'parked' AND OLD.parked_at IS NOT NULL THEN
    NEW.waiting_minutes := OLD.waiting_minutes + extract(epoch FROM now() - OLD.parked_at) / 60;
  END IF;
  NEW.running_since := CASE WHEN NEW.state = 'running' THEN now() ELSE NULL END;
  RETURN NEW;
END;
$$;

CREATE TRIGGER tasks_charge_minutes
  BEFORE UPDATE OF state ON tasks
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION tasks_charge_minutes();
