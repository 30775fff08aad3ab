-- 0019: retention (issue 15 item 3, seed D49). Append-only: never edit once released.

-- The reconciler prunes inbox rows past the broker's redelivery horizon and published outbox
-- rows past theirs, oldest first, in bounded batches (libs/store/src/sql/retention.ts). Both
-- tables are written in time order, so a BRIN range index finds the old end for the cost of a
-- few pages and adds next to nothing to the hot inserts.
CREATE INDEX inbox_messages_received_brin ON inbox_messages USING brin (received_at);
CREATE INDEX outbox_messages_created_brin ON outbox_messages USING brin (created_at);
