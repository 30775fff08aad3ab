/**
 * What a turn produces besides journal outcomes, held in memory until the turn's final unit of
 * work writes it with the checkpoint: offloaded results (K6), children placed by `spawn` (K4)
 * and the handoff of a halted run (K5). Nothing here is visible to anyone before that commit,
 * so a turn that dies before it leaves nothing behind but its journal intents.
 */
import { EverdictError, newId } from '@everdict/contracts';
import type { ExecutionEnvelope, ExecutionMode } from '@everdict/contracts';
import type { HandoffPort, ResultPage, ResultStore, SpawnOutcome, SpawnRequest, SubAgentPort } from '@everdict/agent-runtime';
import { newPaper } from '@everdict/store';
import type { Db, NewPaper } from '@everdict/store';
import { readPermittedPaper } from './paperAccess.js';

const RESULT_SCHEMA = 'everdict/tool-result-full.v1';

export interface PlacedChild {
  readonly childTaskId: string;
  readonly spawnCallId: string;
  readonly objective: string;
  readonly toolNames: readonly string[];
  readonly envelope: ExecutionEnvelope;
  readonly mode: ExecutionMode | null;
  readonly depth: number;
  /** Papers and grants the spawn asked for (null: it named none); narrowed to the parent's at placement. */
  readonly papers: readonly string[] | null;
  readonly grants: readonly string[] | null;
}

export class TurnBuffer {
  readonly papers: NewPaper[] = [];
  readonly children: PlacedChild[] = [];
  private readonly results = new Map<string, string>();
  /** Set when the kernel asked for a handoff (a halted run owes its successor a checkpoint). */
  handoffRequested = false;

  addResult(ref: string, taskId: string, content: string): void {
    this.results.set(ref, content);
    this.papers.push(newPaper({ kind: 'artefact', name: resultPaperName(taskId, ref), schemaId: RESULT_SCHEMA, bytes: Buffer.from(content, 'utf8') }));
  }

  result(ref: string): string | undefined {
    return this.results.get(ref);
  }

  /**
   * Hands over the papers of `refs` to a write that makes them durable before the turn's commit
   * (the outcomes that cite them are written early, turnJournal.ts): they leave `papers`, so the
   * turn's commit does not insert them twice; they stay readable from this buffer.
   */
  takeResults(taskId: string, refs: readonly string[]): NewPaper[] {
    const names = new Set(refs.map((ref) => resultPaperName(taskId, ref)));
    const taken = this.papers.filter((p) => names.has(p.name));
    for (const p of taken) this.papers.splice(this.papers.indexOf(p), 1);
    return taken;
  }
}

const resultPaperName = (taskId: string, ref: string) => `results/${taskId}/${ref}`;

function page(content: string, offset: number, limit: number): ResultPage {
  const total = content.length;
  const start = Math.min(Math.max(0, offset), total);
  const end = Math.min(total, start + Math.max(1, limit));
  return { text: content.slice(start, end), offset: start, total, nextOffset: end < total ? end : null };
}

/**
 * Large tool results as papers of the case. A task pages back its own results, and the papers
 * its narrowed context permits (given by its parent at spawn); any other paper of the case is
 * refused and the refusal recorded in the ledger (paperAccess.ts).
 */
export function paperResultStore(db: Db, caseId: string, buffer: TurnBuffer): ResultStore {
  return {
    async put(owner, content) {
      const ref = `result:${owner.callId}`;
      buffer.addResult(ref, owner.taskId, content);
      return ref;
    },
    async read(taskId, ref, offset, limit) {
      const pending = buffer.result(ref);
      if (pending !== undefined) return page(pending, offset, limit);
      const { rows } = await db.query<{ bytes: Buffer }>({
        name: 'tw_read_result_paper',
        text: `SELECT r.bytes FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
                WHERE p.case_id = $1::uuid AND p.name = $2::text`,
        values: [caseId, resultPaperName(taskId, ref)],
      });
      const bytes = rows[0]?.bytes;
      if (bytes) return page(bytes.toString('utf8'), offset, limit);
      const other = await readPermittedPaper(db, caseId, taskId, ref);
      return other.kind === 'read' ? page(other.bytes.toString('utf8'), offset, limit) : null;
    },
  };
}

/**
 * Sub-agents as durable child TASKS (K4). The child's id is allocated here; its row and its
 * task.runnable are written by the parent's turn commit, idempotent on the spawn call id.
 */
export function deferredSubAgents(buffer: TurnBuffer): SubAgentPort {
  return {
    async spawn(req: SpawnRequest): Promise<SpawnOutcome> {
      if (buffer.children.some((c) => c.spawnCallId === req.spawnCallId)) {
        throw new EverdictError('duplicate_spawn', `spawn call ${req.spawnCallId} placed twice in one turn`, { details: { field: 'spawnCallId' } });
      }
      const childTaskId = newId();
      buffer.children.push({
        childTaskId,
        spawnCallId: req.spawnCallId,
        objective: req.objective,
        toolNames: [...req.toolNames],
        envelope: req.envelope,
        mode: req.mode ?? null,
        depth: req.depth,
        papers: req.papers ? [...req.papers] : null,
        grants: req.grants ? [...req.grants] : null,
      });
      return { kind: 'deferred', childTaskId };
    },
  };
}

/**
 * The handoff of a halted run: its checkpoint is written by the same unit of work that records
 * the settlement, so the settlement can only ever be read next to a published checkpoint.
 */
export function committedHandoff(buffer: TurnBuffer): HandoffPort {
  return {
    async publish() {
      buffer.handoffRequested = true;
      return 'published';
    },
  };
}
