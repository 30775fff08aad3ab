-- 0005: consent for egress reads (issue 11, K3). Append-only: never edit once released.

-- A task waits on a consent gate (park reason `consent`); contracts' PARK_CLASSES say what wakes it.
ALTER TABLE tasks DROP CONSTRAINT tasks_park_reason_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_park_reason_check
  CHECK (park_reason IN ('question', 'gate', 'sub_case', 'connector_down', 'provider_down', 'budget', 'capability_gap', 'children', 'consent'));

-- A consent gate is a GATES row whose digest is the digest of one exact call (tool, canonical
-- arguments, destination) instead of a packet: it has no packet paper. Its decisions, role
-- checks, digest binding, expiry and HTTP API are the write gates' own.
ALTER TABLE gates DROP CONSTRAINT gates_open_has_packet;

-- What a consent gate consents to: one journal call (task + call id), shown to the decider
-- exactly. `consumed_at`: the approved call was admitted (it admits no other call id).
CREATE TABLE consents (
  gate_id      uuid PRIMARY KEY REFERENCES gates(id),
  task_id      uuid NOT NULL REFERENCES tasks(id),
  call_id      uuid NOT NULL UNIQUE,
  tool_name    text NOT NULL,
  arguments    jsonb NOT NULL,
  destination  jsonb NOT NULL,
  -- The rule key that said `ask` (a tool, connector or MCP server name).
  rule         text NOT NULL,
  consumed_at  timestamptz
);

-- A write gate that is open has its packet; a consent gate has its consents row instead.
ALTER TABLE gates ADD COLUMN kind text NOT NULL DEFAULT 'write' CHECK (kind IN ('write', 'consent'));
ALTER TABLE gates ADD CONSTRAINT gates_open_has_packet
  CHECK (state <> 'open' OR kind = 'consent' OR (packet_paper_id IS NOT NULL AND packet_revision IS NOT NULL));
