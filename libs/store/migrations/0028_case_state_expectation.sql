-- 0028: a unit of work may send a case's `case_state` record with its derivation, in the same
-- round trip, when it knows what the derivation will say (issue 15, half-load latency tail).
-- Append-only once released.
--
-- A finish re-derives its case's state and appends the `case_state` record in the same unit of
-- work. The record is chained and hashed by the worker, so it could only be sent once the
-- derivation's answer was back: two round trips, where a plain turn needs one. The group
-- committer now sends the record it expects (what the same kind of finish led to before) with
-- the derivation, and the derivation checks that expectation with this function. When it does
-- not hold, the statement fails with SQLSTATE EV001, the whole unit of work rolls back and is
-- done again the long way: a wrong expectation can cost a round trip, never a wrong record.
CREATE FUNCTION ev_expect_case_state(held boolean, case_id uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF held IS NOT TRUE THEN
    RAISE EXCEPTION 'case % did not derive the expected state', case_id USING ERRCODE = 'EV001';
  END IF;
  RETURN true;
END
$$;
