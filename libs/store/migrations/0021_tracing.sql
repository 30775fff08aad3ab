-- 0021: trace context through the outbox, gates and effect dispatches (issue 14 item 2).
-- Append-only: never edit once released.
--
-- W3C trace context (https://www.w3.org/TR/trace-context/) kept with the work it belongs to.
-- An outbox row carries its envelope's traceparent in a column of its own, so the relay
-- publishes it as the broker header without parsing the body. A gate and an effect dispatch
-- keep the trace they were opened under: the decision (hours later, over HTTP) and the
-- dispatcher loop (claiming rows, not messages) continue that trace instead of starting one.
-- NULL: no trace was active. The CHECK is the version-00 form the runtime writes and accepts.
ALTER TABLE outbox_messages ADD COLUMN traceparent text
  CONSTRAINT outbox_messages_traceparent_w3c CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
ALTER TABLE gates ADD COLUMN traceparent text
  CONSTRAINT gates_traceparent_w3c CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
ALTER TABLE effect_dispatches ADD COLUMN traceparent text
  CONSTRAINT effect_dispatches_traceparent_w3c CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
