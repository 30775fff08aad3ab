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
import { writeTurnAtCommit } from '@everdict/store';
import type { HeadAtCommit, UnitOfWork } from '@everdict/store';
import { freshContext, objectiveText, runContextOf } from './activation.js';
import type { Claim, FreshStart } from './activation.js';
import type { Catalog } from './catalog.js';
import { modelIntentRow, modelRequestDocument } from './turnJournal.js';

/** A claim as the store returns it: with the case type and whether the task is untouched. */
export interface FreshClaim extends Claim {
  readonly caseType: string;
  /** Nothing journalled, checkpointed or waiting (read by the claim statement, claimTask). */
  readonly untouched: boolean;
  /** The case's ledger head once the claim's unit of work commits (claimTask). */
  readonly headAtCommit: HeadAtCommit | null;
}

/**
 * Writes turn 0's model intent for a freshly claimed task. Returns what the activation starts
 * from instead of reading its restore point (nothing else is journalled, checkpointed or
 * waiting for the task: the claim read that under its lock), or null when it wrote nothing.
 */
export async function prewriteFirstIntent(catalog: Catalog, uow: UnitOfWork, claim: FreshClaim): Promise<FreshStart | null> {
  const { task, token } = claim;
  if (!claim.untouched) return null;
  let row: ReturnType<typeof modelIntentRow>;
  let fresh: FreshStart;
  try {
    const context = freshContext(catalog, task, claim.caseType);
    const view = catalog.view(task.profile, context.tools, context.envelope);
    const runCtx = runContextOf(task.id, view, context);
    const request = modelRequestFor({ tools: view.registry }, runCtx, initialRunState(task.id, objectiveText(task.objective)));
    const route = view.model.route;
    const requestDoc = { route, request };
    const intent = { taskId: task.id, turn: 0, ordinal: 0, callId: newId(), kind: 'model' as const, name: route.name, request: requestDoc, requestHash: '' };
    row = modelIntentRow(intent, route.name, view.versions, modelRequestDocument(task.id, requestDoc, view.registry));
    fresh = {
      caseType: claim.caseType,
      intent: { ...intent, requestHash: row.request.contentHash, status: 'intent', response: null, responseHash: null },
      versions: view.versions,
      headAtCommit: claim.headAtCommit,
    };
  } catch {
    return null; // nothing to write; the activation decides (and parks if it must)
  }
  // Written with the other first intents of the claim's unit of work, in one statement at COMMIT.
  writeTurnAtCommit(uow, token, task.case_id, { papers: [row.request], completions: [], intents: [row.call], checkpoint: null, ledger: null });
  return fresh;
}
