/**
 * The first turn's model intent, written by the unit of work that claims a FRESH task (no
 * journal row, no checkpoint, no pending note: a task just opened or spawned). Every later turn
 * gets its intent from the previous turn's commit; this gives the first turn the same two
 * commits (response, outcomes + checkpoint) instead of three.
 *
 * Invariants:
 * - the intent is exactly the request the activation will build for turn 0 — same context
 *   (freshContext), prompt, tools, route and objective — so the kernel finds it in the journal
 *   and asks the model with those bytes; should they differ after all (a config swapped between
 *   claim and turn), the unanswered intent is superseded before the call (turnJournal), never
 *   answered with other bytes;
 * - it is written under the claim's fresh fence, in the claim's transaction: a claim that rolls
 *   back leaves no intent; a stale claimer writes none;
 * - anything that cannot be built (unknown profile, invalid context) writes nothing here: the
 *   activation meets the same problem and parks the task as it always did.
 */
import { newId } from '@everdict/contracts';
import { initialRunState, modelRequestFor } from '@everdict/agent-runtime';
import { writeTurn } from '@everdict/store';
import type { Queryable, UnitOfWork } from '@everdict/store';
import { freshContext, objectiveText, runContextOf } from './activation.js';
import type { Claim } from './activation.js';
import type { Catalog } from './catalog.js';
import { modelIntentRow, modelRequestDocument } from './turnJournal.js';

/** Whether the task has nothing journalled, checkpointed or waiting, and its case type. */
async function freshness(q: Queryable, taskId: string, caseId: string): Promise<{ fresh: boolean; caseType: string } | undefined> {
  const { rows } = await q.query<{ fresh: boolean; case_type: string }>({
    name: 'tw_first_intent_freshness',
    text: `SELECT c.case_type,
                  NOT EXISTS (SELECT 1 FROM runtime_calls r WHERE r.task_id = $1::uuid)
              AND NOT EXISTS (SELECT 1 FROM turn_checkpoints k WHERE k.task_id = $1::uuid)
              AND NOT EXISTS (SELECT 1 FROM task_notes n WHERE n.task_id = $1::uuid AND n.consumed_turn IS NULL) AS fresh
             FROM cases c WHERE c.id = $2::uuid`,
    values: [taskId, caseId],
  });
  const r = rows[0];
  return r ? { fresh: r.fresh, caseType: r.case_type } : undefined;
}

/** Writes turn 0's model intent for a freshly claimed task; false when it wrote nothing. */
export async function prewriteFirstIntent(catalog: Catalog, uow: UnitOfWork, claim: Claim): Promise<boolean> {
  const { task, token } = claim;
  const facts = await freshness(uow, task.id, task.case_id);
  if (!facts?.fresh) return false;
  let row: ReturnType<typeof modelIntentRow>;
  try {
    const context = freshContext(catalog, task, facts.caseType);
    const view = catalog.view(task.profile, context.tools, context.envelope);
    const runCtx = runContextOf(task.id, view, context);
    const request = modelRequestFor({ tools: view.registry }, runCtx, initialRunState(task.id, objectiveText(task.objective)));
    const route = view.model.route;
    const requestDoc = { route, request };
    row = modelIntentRow({ taskId: task.id, turn: 0, ordinal: 0, callId: newId(), kind: 'model', name: route.name, request: requestDoc, requestHash: '' }, route.name, view.versions, modelRequestDocument(task.id, requestDoc, view.registry));
  } catch {
    return false; // nothing to write; the activation decides (and parks if it must)
  }
  await writeTurn(uow, token, task.case_id, { papers: [row.request], completions: [], intents: [row.call], checkpoint: null, ledger: null });
  return true;
}
