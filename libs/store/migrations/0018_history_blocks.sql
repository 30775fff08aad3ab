-- 0018: content-addressed conversation history (issue 15 item 1, seed 004 §2.2). Append-only:
-- never edit once released.
--
-- A turn's model request and runtime state both carry the whole conversation. Instead of
-- storing every message again in every paper, each message's canonical bytes are stored ONCE
-- per case as a history block, and the two papers store a small manifest: the document's bytes
-- before the message list, after it, and the chain head naming the list. A block is keyed by its
-- link hash, `sha256:` of (the previous block's link hash, or '' for the first, then '\n', then
-- the message's bytes): the head names the whole ordered list, and a list that extends another
-- shares all of its blocks — a turn adds only the blocks of the messages it appended.
CREATE TABLE history_blocks (
  case_id     uuid NOT NULL REFERENCES cases(id),
  hash        text NOT NULL CHECK (hash ~ '^sha256:[0-9a-f]{64}$'),
  prev        text CHECK (prev ~ '^sha256:[0-9a-f]{64}$'),
  size_bytes  integer NOT NULL,
  bytes       bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (case_id, hash)
);

-- The layout of a revision's bytes: NULL = the bytes are the document; 'history-manifest.v1' =
-- the bytes are a manifest `{"after","before","count","head","layout"[,"tail"]}` and the document
-- is before || the `count` blocks from the head back, oldest first, joined by ',' || after — or,
-- when the manifest names a `tail` block instead (a long suffix that repeats every turn, such as
-- a request's tool schemas; keyed by the plain sha256 of its bytes, with no `prev`), that block.
-- `content_hash` is always the sha256 of the DOCUMENT's bytes, so every check of a call's
-- request hash or a checkpoint's state hash verifies what was really sent or restored.
ALTER TABLE paper_revisions ADD COLUMN layout text CHECK (layout IN ('history-manifest.v1'));

-- The document a revision stands for: its bytes, or the manifest reassembled from its case's
-- blocks. NULL when a block of the chain is missing (the chain is shorter than the manifest
-- says); a block whose bytes were altered yields a document whose hash no longer matches
-- content_hash, which every reader verifies. Readers (restore, audit, psql) use this instead
-- of `bytes` for request and state papers.
CREATE FUNCTION paper_document(p_paper_id uuid, p_revision integer) RETURNS bytea
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  r record;
  m jsonb;
  n integer;
  found_n integer;
  joined bytea := ''::bytea;
  tail bytea;
BEGIN
  SELECT pr.bytes, pr.layout, p.case_id INTO r
    FROM paper_revisions pr JOIN papers p ON p.id = pr.paper_id
   WHERE pr.paper_id = p_paper_id AND pr.revision = p_revision;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF r.layout IS NULL THEN RETURN r.bytes; END IF;
  -- Bytes that are not a manifest any more (altered) are returned as they are: their hash
  -- cannot match, so the reader reports them corrupt rather than missing.
  BEGIN
    m := convert_from(r.bytes, 'UTF8')::jsonb;
    n := (m->>'count')::integer;
  EXCEPTION WHEN others THEN
    RETURN r.bytes;
  END;
  IF jsonb_typeof(m) <> 'object' OR n IS NULL OR n < 0 OR jsonb_typeof(m->'before') <> 'string' OR jsonb_typeof(m->'after') <> 'string' THEN
    RETURN r.bytes;
  END IF;
  IF m ? 'tail' THEN
    SELECT b.bytes INTO tail FROM history_blocks b WHERE b.case_id = r.case_id AND b.hash = m->>'tail';
    IF NOT FOUND THEN RETURN NULL; END IF;
  ELSE
    tail := convert_to(m->>'after', 'UTF8');
  END IF;
  IF n = 0 THEN
    RETURN convert_to(m->>'before', 'UTF8') || tail;
  END IF;
  WITH RECURSIVE chain(hash, prev, bytes, pos) AS (
    SELECT b.hash, b.prev, b.bytes, 1 FROM history_blocks b WHERE b.case_id = r.case_id AND b.hash = m->>'head'
    UNION ALL
    SELECT b.hash, b.prev, b.bytes, c.pos + 1
      FROM chain c JOIN history_blocks b ON b.case_id = r.case_id AND b.hash = c.prev
     WHERE c.pos < n
  )
  SELECT count(*)::integer, string_agg(chain.bytes, '\x2c'::bytea ORDER BY chain.pos DESC) INTO found_n, joined FROM chain;
  IF found_n <> n THEN RETURN NULL; END IF;
  RETURN convert_to(m->>'before', 'UTF8') || joined || tail;
END;
$$;
