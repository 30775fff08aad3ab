/**
 * The runtime-state paper (schemas/runtime-state.schema.json): the restorable state of a task,
 * written with every checkpoint as canonical JSON bytes whose hash the checkpoint row records.
 * Decoding re-validates the document; anything a restore cannot vouch for is a RestoreFailure
 * — the task parks, the worker never fills a gap from a model's recollection.
 */
import { canonicalJson, EverdictError, schemaValidator, schemaViolations, describeViolations, SCHEMA_ID_BASE } from '@everdict/contracts';
import type { RuntimeStatePaper } from '@everdict/contracts';
import type { RunState } from '@everdict/agent-runtime';
import type { ChatMessage } from '@everdict/llm';
import { manifestPaper, newPaper, type NewPaper } from '@everdict/store';
import { stateDocumentSplice } from './canonical.js';

const RUNTIME_STATE_SCHEMA_ID = `${SCHEMA_ID_BASE}runtime-state.schema.json`;

export type HostState = Omit<RuntimeStatePaper, 'schema' | 'taskId' | 'caseId' | 'chat' | 'turn' | 'phase' | 'run'>;
export type Decision = RuntimeStatePaper['decisions'][number];

type RestoreFailureReason = 'paper_missing' | 'paper_corrupt' | 'invalid_state' | 'journal_corrupt' | 'wrong_task';

/** A checkpoint (or journal paper) that cannot be trusted; the task parks with this reason. */
export class RestoreFailure extends EverdictError {
  constructor(readonly reason: RestoreFailureReason, message: string, details: Record<string, unknown> = {}) {
    super('restore_failed', message, { details: { reason, ...details } });
  }
}

function phaseOf(run: RunState): RuntimeStatePaper['phase'] {
  const s = run.settlement;
  if (s === null) return 'ready';
  return s.kind === 'suspended' ? 'suspended' : s.kind;
}

/**
 * The runtime-state document (v2) of `run` after a turn: the kernel's RunState with its
 * messages lifted to the top-level `chat` (schemas/runtime-state.schema.json says why).
 */
export function stateDocument(caseId: string, host: HostState, run: RunState): RuntimeStatePaper {
  const { messages, ...rest } = run;
  return {
    schema: 'runtime-state.v2',
    taskId: run.taskId,
    caseId,
    chat: messages as unknown as NonNullable<RuntimeStatePaper['chat']>,
    turn: run.turn,
    phase: phaseOf(run),
    ...host,
    run: rest as unknown as RuntimeStatePaper['run'],
  };
}

/**
 * The paper of the checkpoint that lets `doc.taskId` run `doc.turn`. Document: RFC 8785 JSON,
 * stored as a history manifest (its messages as blocks, libs/store history.ts); its content
 * hash, the checkpoint's state hash, is the sha256 of the whole document, run on from the
 * task's previous checkpoint over the appended messages (canonical.ts `stateDocumentSplice`).
 */
export function statePaper(doc: RuntimeStatePaper): NewPaper {
  const name = `tasks/${doc.taskId}/state/${doc.turn}`;
  const spliced = doc.chat === undefined ? null : stateDocumentSplice({ ...doc, chat: doc.chat as unknown as readonly ChatMessage[] });
  if (spliced === null) return newPaper({ kind: 'artefact', name, schemaId: RUNTIME_STATE_SCHEMA_ID, bytes: Buffer.from(canonicalJson(doc), 'utf8') });
  return manifestPaper({ kind: 'artefact', name, schemaId: RUNTIME_STATE_SCHEMA_ID, before: spliced.before, items: spliced.items, after: spliced.after, hash: spliced.hash });
}

/** Parses and validates restored bytes (already hash-verified by the store). */
export function decodeStatePaper(bytes: Buffer, taskId: string, paperId: string): { doc: RuntimeStatePaper; run: RunState } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new RestoreFailure('invalid_state', `state paper ${paperId} is not JSON`, { paperId });
  }
  const validate = schemaValidator('runtime-state.schema.json');
  if (!validate(parsed)) {
    throw new RestoreFailure('invalid_state', `state paper ${paperId} does not match runtime-state.schema.json: ${describeViolations(schemaViolations(validate.errors))}`, { paperId });
  }
  const doc = parsed as RuntimeStatePaper;
  if (doc.taskId !== taskId || doc.run.taskId !== taskId || doc.run.turn !== doc.turn) {
    throw new RestoreFailure('wrong_task', `state paper ${paperId} belongs to another task or turn`, { paperId });
  }
  // v1 (written by earlier runtimes) keeps the conversation in run.messages; the schema's
  // if/then has checked that exactly one of the two places holds it.
  const run = doc.schema === 'runtime-state.v2' ? { ...doc.run, messages: doc.chat } : doc.run;
  return { doc, run: run as unknown as RunState };
}
