/**
 * Paper statements: a named paper per case, immutable content-addressed revisions. A revision is
 * read as its document: a history manifest (migration 0018) comes back reassembled, its content
 * hash being the document's.
 */
import type { Sql } from '../db.js';
import { documentOf } from './journal.js';

const REVISION_COLUMNS = `r.paper_id, r.revision, r.schema_id, r.content_hash, r.size_bytes, r.created_at, ${documentOf('r')} AS bytes`;

export function upsertPaper(p: { id: string; caseId: string; kind: string; name: string }): Sql {
  return {
    text: `INSERT INTO papers (id, case_id, kind, name, head_revision) VALUES ($1::uuid, $2::uuid, $3::text, $4::text, 1)
           ON CONFLICT (case_id, name) DO UPDATE SET head_revision = papers.head_revision + 1
           RETURNING id, head_revision`,
    values: [p.id, p.caseId, p.kind, p.name],
  };
}

export function insertPaperRevision(r: { paperId: string; revision: number; schemaId: string; contentHash: string; bytes: Uint8Array }): Sql {
  return {
    text: `INSERT INTO paper_revisions (paper_id, revision, schema_id, content_hash, size_bytes, bytes)
           VALUES ($1::uuid, $2::int, $3::text, $4::text, $5::int, $6::bytea)`,
    values: [r.paperId, r.revision, r.schemaId, r.contentHash, r.bytes.byteLength, Buffer.from(r.bytes)],
  };
}

export function selectPaperRevision(paperId: string, revision?: number): Sql {
  return revision === undefined
    ? {
        text: `SELECT ${REVISION_COLUMNS} FROM paper_revisions r JOIN papers p ON p.id = r.paper_id AND r.revision = p.head_revision
                WHERE p.id = $1::uuid`,
        values: [paperId],
      }
    : { text: `SELECT ${REVISION_COLUMNS} FROM paper_revisions r WHERE r.paper_id = $1::uuid AND r.revision = $2::int`, values: [paperId, revision] };
}
