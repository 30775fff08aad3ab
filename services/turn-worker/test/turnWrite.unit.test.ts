import { describe, expect, it } from 'vitest';
import { initialRunState, kernelRegistry } from '@everdict/agent-runtime';
import type { CallRecord, RunState } from '@everdict/agent-runtime';
import { newPaper } from '@everdict/store';
import type { Transition } from '../src/decisions.js';
import type { HostState } from '../src/statePaper.js';
import { transitionLabel, turnWrite } from '../src/turnWrite.js';
import type { ParkTransition, TurnProduct, WriteSubject } from '../src/turnWrite.js';
import type { PendingOutcome } from '../src/turnJournal.js';
import type { Versions } from '../src/versions.js';

const task = { id: '0190c0de-0000-7000-8000-000000000001', case_id: '0190c0de-0000-7000-8000-0000000000ca', parent_id: '0190c0de-0000-7000-8000-0000000000aa', ancestry: ['0190c0de-0000-7000-8000-0000000000aa'], profile: 'agent', profile_version: '1' };
const subject: WriteSubject = { task, epoch: 7 };
const versions: Versions = { profile: 'agent', profileVersion: '1', promptHash: 'sha256:p', route: 'main', routeConfigHash: 'sha256:r', runtime: '0.1.0', toolSchemaHash: 'sha256:t' };
const route = { name: 'main', adapter: 'scripted', model: 'm', configHash: 'sha256:r' } as const;
const envelope = { scope: { reads: 'all' as const, writes: [], forbidden: [] }, budget: {} };
const host: HostState = {
  pending: { calls: [], gates: [], messages: [] },
  paperHeads: {},
  handleScopeCaseId: task.case_id,
  completedPlanSteps: [],
  decisions: [],
  summary: null,
  contextHash: 'sha256:ctx',
  versions,
  context: { envelope, mode: null, depth: 1, tools: [] } as unknown as HostState['context'],
};

const model: CallRecord = { taskId: task.id, turn: 3, ordinal: 0, callId: 'c0', kind: 'model', name: 'main', request: {}, requestHash: 'sha256:rq', status: 'completed', response: {}, responseHash: 'sha256:rs' };
const read: CallRecord = { taskId: task.id, turn: 3, ordinal: 1, callId: 'c1', kind: 'tool', name: 'lookup', request: {}, requestHash: 'sha256:tq', status: 'completed', response: {}, responseHash: 'sha256:ts' };
const response = newPaper({ kind: 'artefact', name: 'calls/c1/response/x', schemaId: 'everdict/tool-result.v1', bytes: Buffer.from('{"outcome":"ok"}') });
const outcome: PendingOutcome = { done: { id: 'c1', status: 'completed', responsePaperId: response.id, responseHash: response.contentHash, route: null, outcomeClass: 'ok' }, response, unjournalled: null };

function product(over: Partial<TurnProduct> = {}): TurnProduct {
  const next: RunState = { ...initialRunState(task.id, 'find the answer'), turn: 4 };
  return {
    turn: 3,
    next,
    host,
    checkpoint: true,
    outcomes: [outcome],
    calls: [model, read],
    results: [],
    children: [],
    planRevision: null,
    agent: { registry: kernelRegistry([]), runCtx: { taskId: task.id, systemPrompt: 'be brief', envelope, depth: 1 }, route, versions },
    ...over,
  };
}

const message = (body: Buffer) => JSON.parse(body.toString('utf8')) as { type: string; caseId: string; sender: { taskId: string }; payload: Record<string, unknown> };
const soft: ParkTransition = { kind: 'park', reason: 'gate', detail: { kind: 'soft_cancel' }, backoffMs: null, ask: false };

describe('turnWrite: one value per turn commit', () => {
  const table: {
    name: string;
    transition: Transition;
    lease: unknown;
    outbox: { type: string; payload: Record<string, unknown> }[];
    nextIntent: boolean;
  }[] = [
    { name: 'continue keeps the lease and writes the next turn’s model intent', transition: { kind: 'continue' }, lease: null, outbox: [], nextIntent: true },
    { name: 'resume_now keeps the lease, writes no intent (the resume note changes the request)', transition: { kind: 'resume_now', note: 'go on' }, lease: null, outbox: [], nextIntent: false },
    {
      name: 'release gives the task back with a task.runnable to itself',
      transition: { kind: 'release' },
      lease: { state: 'open', parkReason: null, parkDetail: null, wakeAfterMs: null },
      outbox: [{ type: 'task.runnable', payload: { taskId: task.id, reason: 'retry' } }],
      nextIntent: false,
    },
    {
      name: 'finish (done) ends the task and reports to the parent',
      transition: { kind: 'finish', state: 'done', summary: 'the answer is 42', failureCode: null },
      lease: { state: 'done', parkReason: null, parkDetail: null, wakeAfterMs: null },
      outbox: [{ type: 'task.finished', payload: { taskId: task.id, parentTaskId: task.parent_id, outcome: 'done', summary: 'the answer is 42' } }],
      nextIntent: false,
    },
    {
      name: 'finish (failed) carries a failure code made safe for the wire',
      transition: { kind: 'finish', state: 'failed', summary: '', failureCode: 'Tool-Broke' },
      lease: { state: 'failed', parkReason: null, parkDetail: null, wakeAfterMs: null },
      outbox: [{ type: 'task.finished', payload: { taskId: task.id, parentTaskId: task.parent_id, outcome: 'failed', failureCode: 'tool_broke' } }],
      nextIntent: false,
    },
    {
      name: 'park with a backoff arms the wake timer',
      transition: { kind: 'park', reason: 'provider_down', detail: { route: 'main', attempt: 2 }, backoffMs: 4000, ask: false },
      lease: { state: 'parked', parkReason: 'provider_down', parkDetail: { route: 'main', attempt: 2 }, wakeAfterMs: 4000 },
      outbox: [],
      nextIntent: false,
    },
    {
      name: 'park on a question carries the asked question in its detail',
      transition: { kind: 'park', reason: 'question', detail: { questionId: 'q1' }, backoffMs: null, ask: true },
      lease: { state: 'parked', parkReason: 'question', parkDetail: { questionId: 'q1' }, wakeAfterMs: null },
      outbox: [],
      nextIntent: false,
    },
  ];

  for (const row of table) {
    it(row.name, () => {
      const { write, transition, prewritten } = turnWrite({ subject, transition: row.transition, product: product() });
      expect(transition).toBe(row.transition);
      expect(write.transition ?? null).toEqual(row.lease);
      expect((write.outbox ?? []).map((o) => ({ ...message(o.body), routingKey: o.routingKey, type: o.type }))).toEqual(
        row.outbox.map((o) => expect.objectContaining({ type: o.type, routingKey: o.type, caseId: task.case_id, sender: expect.objectContaining({ taskId: task.id }), payload: o.payload })),
      );
      // The journal part is the same whatever the transition: outcomes, state paper, checkpoint.
      expect(write.completions).toEqual([outcome.done]);
      expect(write.checkpoint).toMatchObject({ turn: 4, contextHash: 'sha256:ctx', versions });
      const state = write.papers.find((p) => p.id === write.checkpoint!.statePaperId)!;
      expect(state).toMatchObject({ name: `tasks/${task.id}/state/4`, contentHash: write.checkpoint!.stateHash });
      expect(write.ledger).toEqual({
        recordId: expect.any(String),
        kind: 'turn',
        body: expect.objectContaining({
          taskId: task.id,
          turn: 3,
          epoch: 7,
          route: 'main',
          requestHash: 'sha256:rq',
          responseHash: 'sha256:rs',
          stateHash: state.contentHash,
          checkpointTurn: 4,
          calls: [
            { ordinal: 0, callId: 'c0', name: 'main', status: 'completed' },
            { ordinal: 1, callId: 'c1', name: 'lookup', status: 'completed' },
          ],
          transition: transitionLabel(row.transition),
        }),
      });
      if (row.nextIntent) {
        expect(write.intents).toEqual([expect.objectContaining({ turn: 4, ordinal: 0, kind: 'model', route: 'main', versions })]);
        const request = write.papers.find((p) => p.id === write.intents[0]!.requestPaperId)!;
        expect(prewritten).toMatchObject({ taskId: task.id, turn: 4, ordinal: 0, callId: write.intents[0]!.id, status: 'intent', requestHash: request.contentHash });
        expect(write.papers.map((p) => p.id)).toEqual([response.id, state.id, request.id]);
      } else {
        expect(write.intents).toEqual([]);
        expect(prewritten).toBeNull();
        expect(write.papers.map((p) => p.id)).toEqual([response.id, state.id]);
      }
    });
  }

  it('a settled or spent run gets no next intent, even when it goes on', () => {
    const base = product();
    const spent = product({
      agent: { ...base.agent, runCtx: { ...base.agent.runCtx, envelope: { ...envelope, budget: { maxTurns: 4 } } } },
      next: { ...base.next, usage: { ...base.next.usage, turns: 4 } },
    });
    const settled = product({ next: { ...base.next, settlement: { kind: 'completed', result: 'done' } } });
    for (const p of [spent, settled]) {
      const { write, prewritten } = turnWrite({ subject, transition: { kind: 'continue' }, product: p });
      expect(write.intents).toEqual([]);
      expect(prewritten).toBeNull();
    }
  });

  it('a turn without a checkpoint writes no state paper; children and plan are named in its record', () => {
    const { write } = turnWrite({ subject, transition: { kind: 'continue' }, product: product({ checkpoint: false, children: ['k1', 'k2'], planRevision: 2 }) });
    expect(write.checkpoint).toBeNull();
    expect(write.ledger?.body).toMatchObject({ stateHash: null, checkpointTurn: null, children: ['k1', 'k2'], plan: 2 });
  });

  it('a park alone (no turn of its own) is the transition and one task_parked record', () => {
    const { write, transition, prewritten } = turnWrite({ subject, transition: soft, product: null });
    expect(transition).toBe(soft);
    expect(prewritten).toBeNull();
    expect(write).toEqual({
      papers: [],
      completions: [],
      intents: [],
      checkpoint: null,
      ledger: { recordId: expect.any(String), kind: 'task_parked', body: { taskId: task.id, epoch: 7, transition: 'park:gate', reason: 'gate', detail: { kind: 'soft_cancel' } } },
      transition: { state: 'parked', parkReason: 'gate', parkDetail: { kind: 'soft_cancel' }, wakeAfterMs: null },
      outbox: [],
    });
  });

  it('a release alone (a drain or a transient fault) gives the lease back with one task.runnable and no record', () => {
    const { write, transition, prewritten } = turnWrite({ subject, transition: { kind: 'release' }, product: null });
    expect(transition).toEqual({ kind: 'release' });
    expect(prewritten).toBeNull();
    expect(write).toMatchObject({ papers: [], completions: [], intents: [], checkpoint: null, ledger: null, transition: { state: 'open', parkReason: null, parkDetail: null, wakeAfterMs: null } });
    expect((write.outbox ?? []).map((o) => [o.type, (JSON.parse(o.body.toString('utf8')) as { payload: unknown }).payload])).toEqual([['task.runnable', { taskId: task.id, reason: 'retry' }]]);
  });

  it('allocates every write its own ledger record id (a redo of the same write keeps it)', () => {
    const a = turnWrite({ subject, transition: { kind: 'continue' }, product: product() }).write.ledger!;
    const b = turnWrite({ subject, transition: { kind: 'continue' }, product: product() }).write.ledger!;
    expect(a.recordId).not.toBe(b.recordId);
  });
});
