-- 0026: the inbox row costs a consumer's unit of work less (issue 15, inbox dedup cost).
-- Append-only once released.
--
-- Every delivery inserts one inbox row, as its own statement, and an INSERT statement pays for
-- each index and CHECK of its table when it starts, whatever the rows: the CHECK's expression
-- is read back from its stored text and prepared for every statement, each index is opened and
-- described. Measured on one connection (the consumer's insert, then a one-row UPDATE, against
-- the UPDATE alone): the inbox row cost the server 22–24 µs, 18 without the BRIN index, 14
-- without the CHECK too; 18–20 with this migration.
--
-- - The disposition's closed list is an enum instead of a CHECK: the database still refuses a
--   value outside it, through the type's input function, with no expression to prepare.
-- - The primary key leads with the message id, and the BRIN index on received_at goes:
--   retention finds old rows through the key (message ids are UUIDv7, time first; the
--   statement is in libs/store/src/sql/retention.ts), received_at still decides.
CREATE TYPE inbox_disposition AS ENUM ('applied', 'ignored', 'refused');
ALTER TABLE inbox_messages DROP CONSTRAINT inbox_messages_disposition_check;
ALTER TABLE inbox_messages ALTER COLUMN disposition TYPE inbox_disposition USING disposition::inbox_disposition;
DROP INDEX inbox_messages_received_brin;
ALTER TABLE inbox_messages DROP CONSTRAINT inbox_messages_pkey;
ALTER TABLE inbox_messages ADD CONSTRAINT inbox_messages_pkey PRIMARY KEY (message_id, consumer);
