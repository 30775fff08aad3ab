/**
 * Notes: what reaches a task between turns — an answer, a child's report, a child's plan, a
 * child's DeadEnd, a budget top-up, a gate decision, an effect outcome. Each note becomes part of the next model
 * request (one user message, in note order) and, where it is a decision, a reference the
 * runtime state keeps (and compaction must preserve). Pure functions.
 */
import type { RunBudget } from '@everdict/contracts';
import type { NoteRow } from '@everdict/store';
import type { Decision } from './statePaper.js';

type Body = Record<string, unknown>;
const str = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v ?? null));

function noteText(note: Pick<NoteRow, 'kind' | 'body'>): string {
  const b = (note.body ?? {}) as Body;
  switch (note.kind) {
    case 'answer':
      return `Answer to your question ${str(b.questionId)} (from ${str(b.answeredBy)}): ${str(b.answer)}`;
    case 'child_report':
      return `Sub-agent ${str(b.childTaskId)} finished (${str(b.outcome)}): ${str(b.summary ?? '')}`;
    case 'plan': {
      const steps = Array.isArray(b.steps) ? (b.steps as { stepId?: unknown; title?: unknown }[]).map((s) => `${str(s.stepId)}: ${str(s.title)}`).join('; ') : '';
      return `Sub-agent ${str(b.childTaskId)} submitted plan revision ${str(b.revision)}, confirmed by you: ${steps}`;
    }
    case 'question': {
      const alternatives = Array.isArray(b.alternatives) && b.alternatives.length > 0 ? ` Alternatives: ${(b.alternatives as unknown[]).map(str).join(' | ')}.` : '';
      return (
        `Sub-agent ${str(b.childTaskId)} asks you (question ${str(b.questionId)}): ${str(b.gap)}. Checked: ${str(b.checked)}. Depends on it: ${str(b.dependsOn)}.${alternatives} ` +
        `Decision needed: ${str(b.decisionNeeded)}. Answer it with wait {"for": "children", "reason": ..., "answers": [{"questionId": "${str(b.questionId)}", "answer": ...}]}; if you cannot decide, ask your own question.`
      );
    }
    case 'top_up':
      return `Your budget was topped up: ${str(b.budget)}`;
    case 'dead_end':
      return `Sub-agent ${str(b.childTaskId)} hit a dead end and is parked (capability_gap): a message for it (${str(b.messageType)} version ${str(b.messageVersion)}) could not be understood. It will not report on its own; decide without it or ask an operator.`;
    case 'gate':
      return `Gate ${str(b.gateId)} was decided: ${str(b.outcome)}${b.reason ? ` (${str(b.reason)})` : ''}${b.outcome === 'approved' ? '; the effect runs now.' : '; nothing was executed.'}`;
    case 'outcome':
      return `Effect call ${str(b.callId)} landed: ${str(b.outcome)}${b.established ? ` (${str(b.established)})` : ''}${b.receipt ? `. Receipt: ${JSON.stringify(b.receipt)}` : ''}`;
    default:
      return str(b.text ?? b);
  }
}

/** The user message that carries a turn's notes (null when there are none). */
export function notesMessage(notes: readonly Pick<NoteRow, 'kind' | 'body'>[]): string | null {
  return notes.length === 0 ? null : notes.map(noteText).join('\n');
}

/** The decision reference a note amounts to, if any. */
export function noteDecision(note: Pick<NoteRow, 'kind' | 'body'>, turn: number): Decision | null {
  const b = (note.body ?? {}) as Body;
  switch (note.kind) {
    case 'answer':
      return { kind: 'answer', ref: str(b.questionId), turn };
    case 'plan':
      return { kind: 'plan_confirmed', ref: `${str(b.childTaskId)}@${str(b.revision)}`, turn };
    case 'child_report':
      return { kind: 'child_report', ref: str(b.childTaskId), turn };
    case 'top_up':
      return { kind: 'top_up', ref: str(b.ref ?? 'budget'), turn };
    case 'gate':
      return { kind: 'gate', ref: str(b.gateId), turn };
    case 'outcome':
      return { kind: 'outcome', ref: str(b.callId), turn };
    default:
      return null;
  }
}

/** A top-up raises the limits it names (never lowers them). */
export function topUp(budget: RunBudget, notes: readonly Pick<NoteRow, 'kind' | 'body'>[]): RunBudget {
  let next: RunBudget = budget;
  for (const n of notes) {
    if (n.kind !== 'top_up') continue;
    const add = ((n.body as Body).budget ?? {}) as Partial<Record<keyof RunBudget, number>>;
    const out: Record<string, number> = { ...(next as Record<string, number>) };
    for (const key of ['maxTurns', 'maxToolCalls', 'maxTokens', 'maxActiveMinutes'] as const) {
      const extra = add[key];
      if (typeof extra === 'number' && extra > 0 && out[key] !== undefined) out[key] = out[key]! + extra;
    }
    next = out as RunBudget;
  }
  return next;
}
