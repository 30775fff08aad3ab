/**
 * Handlers of the kernel's cognition tools (K2). Each returns what the model is shown and the
 * effect on the run state; the effect is journalled with the result and folded by the caller,
 * so a replayed turn re-applies it without running the handler again.
 */
import type { IntrinsicToolName } from '@everdict/contracts';
import type { IntrinsicEffect } from './call-record.js';
import { childToolNames } from './children.js';
import type { KernelEvent } from './events.js';
import type { KernelPorts } from './kernel-ports.js';
import type { ArmedWait, ChildAnswer, PlanDraft, RunContext, RunState, TodoItem, WaitQuestion } from './state.js';

interface IntrinsicResult {
  readonly content: string;
  readonly outcome: 'ok' | 'tool_error';
  readonly effect: IntrinsicEffect | null;
}

interface IntrinsicCall {
  readonly name: IntrinsicToolName;
  /** Already checked against the intrinsic's input schema. */
  readonly args: Readonly<Record<string, unknown>>;
  readonly callId: string;
  readonly turn: number;
}

const ok = (content: string, effect: IntrinsicEffect | null = null): IntrinsicResult => ({ content, outcome: 'ok', effect });
const toolError = (content: string): IntrinsicResult => ({ content, outcome: 'tool_error', effect: null });

export async function runIntrinsic(ports: KernelPorts, ctx: RunContext, state: RunState, call: IntrinsicCall, events: KernelEvent[]): Promise<IntrinsicResult> {
  switch (call.name) {
    case 'todo': {
      const items = call.args.items as TodoItem[];
      const done = items.filter((i) => i.status === 'done').length;
      return ok(`Todo list updated: ${items.length} items, ${done} done.`, { kind: 'todo', items });
    }
    case 'plan': {
      const raw = call.args.steps as { id: string; title: string; dependsOn?: string[] }[];
      const ids = new Set<string>();
      for (const s of raw) {
        if (ids.has(s.id)) return toolError(`Plan rejected: step id ${s.id} is used twice.`);
        ids.add(s.id);
      }
      for (const s of raw) {
        const unknown = (s.dependsOn ?? []).filter((d) => !ids.has(d));
        if (unknown.length > 0) return toolError(`Plan rejected: step ${s.id} depends on unknown step(s) ${unknown.join(', ')}.`);
      }
      const plan: PlanDraft = {
        revision: (state.plan?.revision ?? 0) + 1,
        steps: raw.map((s) => ({ id: s.id, title: s.title, dependsOn: s.dependsOn ?? [] })),
        note: typeof call.args.note === 'string' ? call.args.note : null,
      };
      events.push({ type: 'plan_drafted', turn: call.turn, plan });
      return ok(`Plan revision ${plan.revision} recorded with ${plan.steps.length} steps; it goes to ${ctx.depth === 0 ? 'a human' : 'your parent'} for confirmation.`, { kind: 'plan', plan });
    }
    case 'spawn': {
      if (ports.subAgents === undefined) return toolError('Sub-agents are not available in this run.');
      if (ctx.depth + 1 > ports.policy.maxDepth) return toolError(`Sub-agents may not nest deeper than ${ports.policy.maxDepth}.`);
      const requested = call.args.tools as string[] | undefined;
      const toolNames = childToolNames(ports.tools, ctx.envelope, requested);
      const objective = call.args.objective as string;
      const papers = call.args.papers as string[] | undefined;
      const grants = call.args.grants as string[] | undefined;
      const outcome = await ports.subAgents.spawn({
        parentTaskId: ctx.taskId,
        spawnCallId: call.callId,
        objective,
        toolNames,
        envelope: ctx.envelope,
        mode: ctx.mode,
        depth: ctx.depth + 1,
        ...(papers !== undefined ? { papers: [...new Set(papers)] } : {}),
        ...(grants !== undefined ? { grants: [...new Set(grants)] } : {}),
      });
      const deferred = outcome.kind === 'deferred';
      events.push({ type: 'child_spawned', turn: call.turn, callId: call.callId, childTaskId: outcome.childTaskId, deferred });
      const child = { childTaskId: outcome.childTaskId, spawnCallId: call.callId, objective, status: deferred ? ('running' as const) : ('settled' as const) };
      const withheld = requested === undefined ? [] : requested.filter((n) => !toolNames.includes(n));
      const note = withheld.length > 0 ? ` Not delegable and withheld: ${withheld.join(', ')}.` : '';
      if (outcome.kind === 'deferred') return ok(`Sub-agent ${outcome.childTaskId} started with tools [${toolNames.join(', ')}]; its report arrives when it settles.${note}`, { kind: 'child', child, deferred });
      const s = outcome.settlement;
      const report =
        s.kind === 'completed' ? `completed: ${s.result ?? '(no text)'}` : s.kind === 'suspended' ? `suspended (${s.cause}, parked ${s.parkReason})` : `failed (${s.code})`;
      return { content: `Sub-agent ${outcome.childTaskId} ${report}${note}`, outcome: s.kind === 'completed' ? 'ok' : 'tool_error', effect: { kind: 'child', child, deferred } };
    }
    case 'read_tool_result': {
      const ref = call.args.ref as string;
      const offset = (call.args.offset as number | undefined) ?? 0;
      const limit = (call.args.limit as number | undefined) ?? ports.policy.pageChars;
      const page = await ports.results.read(ctx.taskId, ref, offset, limit);
      if (page === null) return toolError(`No stored result ${ref} is readable by this run.`);
      const tail = page.nextOffset === null ? `[end of result; ${page.total} chars]` : `[chars ${page.offset}..${page.nextOffset} of ${page.total}; next offset ${page.nextOffset}]`;
      return ok(`${page.text}\n${tail}`);
    }
    case 'wait': {
      const answers = (call.args.answers as ChildAnswer[] | undefined) ?? [];
      const ids = new Set(answers.map((a) => a.questionId));
      if (ids.size !== answers.length) return toolError('Wait rejected: a question is answered twice.');
      const wait: ArmedWait = {
        for: call.args.for as ArmedWait['for'],
        reason: call.args.reason as string,
        question: (call.args.question as WaitQuestion | undefined) ?? null,
        ...(answers.length > 0 ? { answers: answers.map((a) => ({ questionId: a.questionId, answer: a.answer })) } : {}),
      };
      const answered = answers.length > 0 ? ` ${answers.length} answer(s) go to the sub-agents that asked.` : '';
      return ok(`Waiting for ${wait.for === 'question' ? 'an answer' : 'sub-agent reports'}; this run suspends after this turn.${answered}`, { kind: 'wait', wait });
    }
  }
}
