/**
 * Enforcement of a task's permitted papers where agents read papers: `read_tool_result` pages a
 * stored result through the result store, and the store asks here about any ref that is not the
 * task's own result. A paper of the case outside the task's narrowed context is REFUSED (the model
 * sees "not readable", exactly as for an unknown ref) and the refusal is recorded in the case's
 * ledger — once per task and paper (the record id is derived from both, so a replayed read does
 * not record it twice).
 */
import { sha256Hex } from '@everdict/contracts';
import { loadTask, papersNamed, Store } from '@everdict/store';
import type { Db } from '@everdict/store';
import { heldAuthority } from './authority.js';

type PaperRead = { readonly kind: 'read'; readonly name: string; readonly bytes: Buffer } | { readonly kind: 'refused'; readonly name: string } | { readonly kind: 'unknown' };

/** Reads `ref` for `taskId` if its context permits the paper it names (own results are read by the caller). */
export async function readPermittedPaper(db: Db, caseId: string, taskId: string, ref: string): Promise<PaperRead> {
  const candidates = await papersNamed(db, caseId, ref);
  if (candidates.length === 0) return { kind: 'unknown' };
  const task = await loadTask(db, taskId);
  const held = heldAuthority(task ?? { parent_id: null, context: null }, []);
  const permitted = candidates.find((c) => held.permittedPapers.includes(c.name));
  if (permitted) return { kind: 'read', name: permitted.name, bytes: permitted.bytes };
  const name = candidates[0]!.name;
  await new Store(db).unitOfWork((uow) =>
    uow.appendLedger(caseId, { recordId: stableId('paper_read_refused', taskId, name), kind: 'paper_read_refused', body: { taskId, ref, paper: name, why: 'the paper is not in the task’s permitted papers' } }),
  );
  return { kind: 'refused', name };
}

/** A UUID-shaped id derived from `parts` (same parts, same id). */
function stableId(...parts: string[]): string {
  const h = sha256Hex(parts.join('\u0000'));
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
