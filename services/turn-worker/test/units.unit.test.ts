import { describe, expect, it } from 'vitest';
import { crash, validateFleetConfig } from '@everdict/service-kit';
import { CRASH_POINTS } from '../src/crashpoints.js';

const parseCrashSpec = (spec: string) => crash.parseCrashSpec(CRASH_POINTS, spec);
const crashPointsFromEnv = (env: Record<string, string | undefined>, kill?: () => void) => crash.crashPointsFromEnv(CRASH_POINTS, env, kill);
import { noteDecision, notesMessage, topUp } from '../src/notes.js';
import { canonicalJson } from '@everdict/contracts';
import { initialRunState } from '@everdict/agent-runtime';
import { decodeStatePaper, stateDocument } from '../src/statePaper.js';
import type { HostState } from '../src/statePaper.js';

describe('crash points', () => {
  it('parse, and kill exactly at the n-th arrival', () => {
    expect([...parseCrashSpec('after_intent:3, after_commit')]).toEqual([
      ['after_intent', 3],
      ['after_commit', 1],
    ]);
    expect(() => parseCrashSpec('after_lunch:1')).toThrow(/EVERDICT_CRASHPOINT/);
    let kills = 0;
    const cp = crashPointsFromEnv({ EVERDICT_CRASHPOINT: 'after_model:2' }, () => void kills++);
    cp.reach('after_model');
    cp.reach('after_intent');
    expect(kills).toBe(0);
    cp.reach('after_model');
    expect(kills).toBe(1);
    cp.reach('after_model');
    expect(kills).toBe(1);
    const none = crashPointsFromEnv({});
    none.reach('after_commit');
  });
});

describe('notes', () => {
  it('become one message and decision references; a top-up only raises limits', () => {
    const notes = [
      { kind: 'answer', body: { questionId: 'q1', answer: 'yes', answeredBy: 'ann' } },
      { kind: 'child_report', body: { childTaskId: 'k1', outcome: 'done', summary: 'fine' } },
    ];
    expect(notesMessage(notes)).toBe('Answer to your question q1 (from ann): yes\nSub-agent k1 finished (done): fine');
    expect(notes.map((n) => noteDecision(n, 4))).toEqual([
      { kind: 'answer', ref: 'q1', turn: 4 },
      { kind: 'child_report', ref: 'k1', turn: 4 },
    ]);
    expect(topUp({ maxTurns: 2, maxTokens: 10 }, [{ kind: 'top_up', body: { budget: { maxTurns: 3, maxToolCalls: 5, maxTokens: -1 } } }])).toEqual({ maxTurns: 5, maxTokens: 10 });
  });
});

describe('fleet config', () => {
  it('names the JSON path of every problem, shape and references alike', () => {
    const bad = {
      version: 1,
      routes: { main: { adapter: 'scripted', model: 'm' } },
      profiles: { agent: { version: '1', route: 'nope', prompt: 'p', tools: ['ghost'] } },
      caseTypes: { ticket: { rootProfile: 'agent', scope: { reads: 'all', writes: [], forbidden: [] }, extra: 1 } },
    };
    expect(() => validateFleetConfig(bad)).toThrow(/\/caseTypes\/ticket\/extra is not allowed/);
    const refs = { ...bad, caseTypes: { ticket: { rootProfile: 'missing', scope: { reads: 'all', writes: [], forbidden: [] } } } };
    try {
      validateFleetConfig(refs);
      expect.unreachable();
    } catch (err) {
      const paths = (err as { problems: { path: string }[] }).problems.map((p) => p.path);
      expect(paths).toEqual(['/routes/main/scriptPath', '/profiles/agent/route', '/profiles/agent/tools/0', '/caseTypes/ticket/rootProfile']);
    }
  });
});

describe('state paper', () => {
  it('refuses bytes that are not a valid runtime state of this task', () => {
    expect(() => decodeStatePaper(Buffer.from('{"schema":'), 't', 'p')).toThrow(expect.objectContaining({ code: 'restore_failed', reason: 'invalid_state' }));
    expect(() => decodeStatePaper(Buffer.from('{"schema":"runtime-state.v1"}'), 't', 'p')).toThrow(/does not match runtime-state.schema.json/);
  });

  it('restores the v2 layout it writes and the v1 layout of earlier runtimes; refuses a mix of the two', () => {
    const taskId = '0190f0e0-0000-7000-8000-000000000001';
    const caseId = '0190f0e0-0000-7000-8000-000000000002';
    const hash = `sha256:${'0'.repeat(64)}`;
    const host: HostState = { pending: { calls: [], gates: [], messages: [] }, paperHeads: {}, handleScopeCaseId: caseId, completedPlanSteps: [], decisions: [], summary: null, contextHash: null, versions: { profile: 'a', profileVersion: '1', promptHash: hash, route: 'r', routeConfigHash: hash, runtime: '0.1.0', toolSchemaHash: hash }, context: { envelope: { scope: { reads: 'all', writes: [], forbidden: [] }, budget: {} }, mode: null, depth: 0, tools: null } };
    const run = { ...initialRunState(taskId, 'objective'), turn: 2, messages: [{ role: 'user' as const, content: 'héllo' }, { role: 'tool' as const, callId: 'c', name: 'echo', content: 'x', isError: false }] };
    const v2 = stateDocument(caseId, host, run);
    expect(v2.schema).toBe('runtime-state.v2');
    expect(Object.keys(JSON.parse(canonicalJson(v2)) as object).slice(0, 2)).toEqual(['caseId', 'chat']);
    expect(decodeStatePaper(Buffer.from(canonicalJson(v2)), taskId, 'p').run).toEqual(run);
    const { chat, ...rest } = v2;
    const v1 = { ...rest, schema: 'runtime-state.v1', run: { ...v2.run, messages: chat } };
    expect(decodeStatePaper(Buffer.from(canonicalJson(v1)), taskId, 'p').run).toEqual(run);
    // Both places, or neither: the schema refuses it (a restore never guesses which is right).
    for (const mixed of [{ ...v2, run: v1.run }, { ...v1, chat }, { ...v1, run: v2.run }, rest]) {
      expect(() => decodeStatePaper(Buffer.from(canonicalJson(mixed)), taskId, 'p')).toThrow(expect.objectContaining({ code: 'restore_failed', reason: 'invalid_state' }));
    }
  });
});
