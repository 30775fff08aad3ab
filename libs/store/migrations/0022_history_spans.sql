-- 0022: a long run of bytes is stored once per case (issue 15, seed 004 §2.2). Append-only:
-- never edit once released.
--
-- The same long text recurs in several documents of one turn: a tool call's arguments are in the
-- model's response, the tool's request and result, the assistant message and the tool-result
-- message. Each maximal run of at least 512 bytes containing neither '"' nor '\' (history.ts
-- spansOf) is stored once as a SPAN block — a history_blocks row keyed by the plain sha256 of
-- its bytes, prev NULL, layout NULL — and a document holding it is stored as a spans manifest
-- `{"layout":"spans.v1","parts":[inline, span hash, inline, …, inline]}`: the document is the
-- parts concatenated (positions 1, 3, … inline text; 2, 4, … span hashes). A call's request or
-- response paper (paper_revisions.layout 'spans.v1') and a conversation block
-- (history_blocks.layout 'spans.v1') may be stored this way. Content hashes stay the sha256 of
-- the DOCUMENT's bytes, and every reader verifies them after reassembly.
ALTER TABLE history_blocks ADD COLUMN layout text CHECK (layout IN ('spans.v1'));
ALTER TABLE paper_revisions DROP CONSTRAINT paper_revisions_layout_check;
ALTER TABLE paper_revisions ADD CONSTRAINT paper_revisions_layout_check CHECK (layout IN ('history-manifest.v1', 'spans.v1'));

-- The document of a spans manifest from its case's span blocks. NULL when a span block is
-- missing; bytes that are not a manifest (altered) are returned as they are, so their hash
-- cannot match and the reader reports them corrupt.
CREATE FUNCTION spans_document(p_case_id uuid, p_bytes bytea) RETURNS bytea
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  m jsonb;
  wanted integer;
  found_n integer;
  joined bytea;
BEGIN
  BEGIN
    m := convert_from(p_bytes, 'UTF8')::jsonb;
  EXCEPTION WHEN others THEN
    RETURN p_bytes;
  END;
  IF jsonb_typeof(m) <> 'object' OR jsonb_typeof(m->'parts') <> 'array' THEN
    RETURN p_bytes;
  END IF;
  SELECT (count(*) FILTER (WHERE x.o % 2 = 0))::integer, count(b.hash)::integer,
         string_agg(CASE WHEN x.o % 2 = 1 THEN convert_to(x.p, 'UTF8') ELSE b.bytes END, ''::bytea ORDER BY x.o)
    INTO wanted, found_n, joined
    FROM jsonb_array_elements_text(m->'parts') WITH ORDINALITY AS x(p, o)
    LEFT JOIN history_blocks b ON x.o % 2 = 0 AND b.case_id = p_case_id AND b.hash = x.p AND b.layout IS NULL;
  IF found_n <> wanted THEN RETURN NULL; END IF;
  RETURN COALESCE(joined, ''::bytea);
END;
$$;

-- paper_document() of 0018, reading spans: a 'spans.v1' revision is its spans manifest
-- reassembled; a chain block stored as spans is expanded before it is joined (a block whose
-- span is missing makes the whole document NULL, as a missing chain block does).
CREATE OR REPLACE FUNCTION paper_document(p_paper_id uuid, p_revision integer) RETURNS bytea
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
  r record;
  m jsonb;
  n integer;
  found_n integer;
  missing integer;
  joined bytea := ''::bytea;
  tail bytea;
BEGIN
  SELECT pr.bytes, pr.layout, p.case_id INTO r
    FROM paper_revisions pr JOIN papers p ON p.id = pr.paper_id
   WHERE pr.paper_id = p_paper_id AND pr.revision = p_revision;
  IF NOT FOUND THEN RETURN NULL; END IF;
  IF r.layout IS NULL THEN RETURN r.bytes; END IF;
  IF r.layout = 'spans.v1' THEN RETURN spans_document(r.case_id, r.bytes); END IF;
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
  WITH RECURSIVE chain(hash, prev, bytes, layout, pos) AS (
    SELECT b.hash, b.prev, b.bytes, b.layout, 1 FROM history_blocks b WHERE b.case_id = r.case_id AND b.hash = m->>'head'
    UNION ALL
    SELECT b.hash, b.prev, b.bytes, b.layout, c.pos + 1
      FROM chain c JOIN history_blocks b ON b.case_id = r.case_id AND b.hash = c.prev
     WHERE c.pos < n
  ),
  doc AS (
    SELECT chain.pos, CASE WHEN chain.layout IS NULL THEN chain.bytes ELSE spans_document(r.case_id, chain.bytes) END AS bytes FROM chain
  )
  SELECT count(*)::integer, (count(*) FILTER (WHERE doc.bytes IS NULL))::integer, string_agg(doc.bytes, '\x2c'::bytea ORDER BY doc.pos DESC)
    INTO found_n, missing, joined FROM doc;
  IF found_n <> n OR missing > 0 THEN RETURN NULL; END IF;
  RETURN convert_to(m->>'before', 'UTF8') || joined || tail;
END;
$$;
