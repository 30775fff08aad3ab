-- 0027: the history block's hash CHECKs test the same form without a regular expression (issue
-- 15). Append-only once released.
--
-- A turn inserts about two history blocks, and each is checked twice (hash, prev). A `~` test
-- converts its text to wide characters and runs the regular-expression machine: 8.3 µs a check
-- (200,000 values on one connection), 4 % of the server's CPU in the half-load phase of
-- bench:turns (perf, `textregexeq`). The same form tested by plain string functions costs 2.6 µs:
-- 71 bytes, the `sha256:` prefix, then only lower-case hex digits. A value with a multibyte
-- character fails it as it failed the pattern: `ltrim` leaves that character behind.
--
-- The constraints are added NOT VALID: every row already in the table passed the equivalent
-- pattern they replace, and validating would read the whole table under the lock this
-- migration holds, stopping every turn write meanwhile. They hold for every row written from
-- here on; `ALTER TABLE history_blocks VALIDATE CONSTRAINT ...` checks the older rows without
-- stopping writes, whenever an operator wants it done.
ALTER TABLE history_blocks
  DROP CONSTRAINT history_blocks_hash_check,
  DROP CONSTRAINT history_blocks_prev_check,
  ADD CONSTRAINT history_blocks_hash_check
    CHECK (octet_length(hash) = 71 AND starts_with(hash, 'sha256:') AND ltrim(substr(hash, 8), '0123456789abcdef') = '') NOT VALID,
  ADD CONSTRAINT history_blocks_prev_check
    CHECK (octet_length(prev) = 71 AND starts_with(prev, 'sha256:') AND ltrim(substr(prev, 8), '0123456789abcdef') = '') NOT VALID;
