/**
 * Acceptance (issue 13 item 4): after a run on real worker processes against providers that
 * report usage, `cost_ledger` holds exactly one row per answered model call with the provider's
 * measured tokens and cost (a value the provider did not send stays unknown, never 0), tasks
 * are charged their running minutes and their parked minutes apart, and the case total the case
 * view shows sums the root and its child.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { providerServer } from '@everdict/testkit';
import { caseView } from '@everdict/intake';
import { loadCase, loadCaseDetail } from '@everdict/store';
import { eventually, testConfig, turnsFixture, type TurnsFixture, type WorkerProc } from './helpers.js';

type Provider = Awaited<ReturnType<typeof providerServer>>;

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  cost?: number;
}

/** An OpenAI-compatible chat completion answering one tool call (or text), with `usage`. */
function reply(model: string, usage: Usage, out: { tool?: [string, Record<string, unknown>]; text?: string }) {
  const message = out.tool
    ? { role: 'assistant', content: null, tool_calls: [{ id: `call_${Math.random().toString(36).slice(2)}`, type: 'function', function: { name: out.tool[0], arguments: JSON.stringify(out.tool[1]) } }] }
    : { role: 'assistant', content: out.text ?? '' };
  return { status: 200, body: JSON.stringify({ id: 'cmpl', object: 'chat.completion', model, choices: [{ index: 0, message, finish_reason: out.tool ? 'tool_calls' : 'stop' }], usage }) };
}

describe('costs and budgets', () => {
  let fx: TurnsFixture;
  let worker: WorkerProc;
  let lead: Provider;
  let helper: Provider;
  beforeAll(async () => {
    [lead, helper] = await Promise.all([providerServer(), providerServer()]);
    const config = testConfig({
      routes: { lead: 'unused.json', helper: 'unused.json' },
      profiles: {
        lead: { version: '1', route: 'lead', prompt: 'You lead the case.', tools: ['lookup'], childProfile: 'helper' },
        helper: { version: '1', route: 'helper', prompt: 'You help the lead.', tools: ['lookup'] },
      },
    });
    // Each profile has its own provider, so each one's replies are answered in its own order.
    config.routes = {
      lead: { adapter: 'openai', model: 'lead-model', baseUrl: `${lead.baseUrl}/v1` },
      helper: { adapter: 'openai', model: 'helper-model', baseUrl: `${helper.baseUrl}/v1` },
    };
    fx = await turnsFixture('turns_costs', config);
    lead.reply(
      reply('lead-model-2026', { prompt_tokens: 100, completion_tokens: 10, cost: 0.0011 }, { tool: ['spawn', { objective: 'check the logs' }] }),
      reply('lead-model-2026', { prompt_tokens: 140, completion_tokens: 12, cost: 0.0013 }, { tool: ['wait', { for: 'children', reason: 'the log check' }] }),
      // The provider does not say what this call cost: unknown, never 0.
      reply('lead-model-2026', { prompt_tokens: 190, completion_tokens: 20 }, { text: 'all done' }),
    );
    helper.reply(reply('helper-model-2026', { prompt_tokens: 60, completion_tokens: 7, cost: 0.0004 }, { text: 'the logs are clean' }));
    worker = await fx.worker('c1');
  });
  afterAll(async () => {
    await fx?.close();
    await Promise.allSettled([lead?.close(), helper?.close()]);
  });

  it('records every model call with the provider usage and sums the case over its children', async () => {
    const root = await fx.openCase('ticket', 'check and report');
    await eventually(async () => (await fx.rows<{ state: string }>('SELECT state FROM tasks WHERE id = $1', [root.taskId]))[0]?.state === 'done', {
      timeoutMs: 40_000,
      what: 'the root finished',
    }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${worker.output().slice(-3000)}`);
    });
    const [child] = await fx.rows<{ id: string; state: string }>('SELECT id, state FROM tasks WHERE parent_id = $1', [root.taskId]);
    expect(child?.state).toBe('done');

    // One cost row per answered model call, and no other.
    const calls = await fx.rows<{ id: string; task_id: string; turn: number }>(
      "SELECT c.id, c.task_id, c.turn FROM runtime_calls c JOIN tasks t ON t.id = c.task_id WHERE t.case_id = $1 AND c.kind = 'model' AND c.status = 'completed' ORDER BY c.task_id, c.turn",
      [root.caseId],
    );
    const costs = await fx.rows<{ call_id: string; task_id: string; route: string; model: string; input_tokens: number | null; output_tokens: number | null; cost: string | null }>(
      'SELECT call_id, task_id, route, model, input_tokens, output_tokens, cost::text AS cost FROM cost_ledger WHERE case_id = $1',
      [root.caseId],
    );
    expect(calls).toHaveLength(4);
    expect(costs.map((c) => c.call_id).sort()).toEqual(calls.map((c) => c.id).sort());
    const turnOf = new Map(calls.map((c) => [c.id, c.turn]));
    const byTurn = (taskId: string) =>
      costs
        .filter((c) => c.task_id === taskId)
        .sort((a, b) => turnOf.get(a.call_id)! - turnOf.get(b.call_id)!)
        .map(({ route, model, input_tokens, output_tokens, cost }) => ({ route, model, input_tokens, output_tokens, cost }));
    expect(byTurn(root.taskId)).toEqual([
      { route: 'lead', model: 'lead-model-2026', input_tokens: 100, output_tokens: 10, cost: '0.0011' },
      { route: 'lead', model: 'lead-model-2026', input_tokens: 140, output_tokens: 12, cost: '0.0013' },
      { route: 'lead', model: 'lead-model-2026', input_tokens: 190, output_tokens: 20, cost: null },
    ]);
    expect(byTurn(child!.id)).toEqual([{ route: 'helper', model: 'helper-model-2026', input_tokens: 60, output_tokens: 7, cost: '0.0004' }]);

    // Minutes: both ran; the root also waited, parked on its child, and that is not budget.
    const minutes = await fx.rows<{ id: string; used: string; waiting: string; running_since: Date | null }>(
      'SELECT id, budget_used_minutes::text AS used, waiting_minutes::text AS waiting, running_since FROM tasks WHERE case_id = $1',
      [root.caseId],
    );
    for (const m of minutes) {
      expect(Number(m.used)).toBeGreaterThan(0);
      expect(m.running_since).toBeNull();
    }
    expect(Number(minutes.find((m) => m.id === root.taskId)!.waiting)).toBeGreaterThan(0);

    // The case view: each task's own usage, and a case total over the root and its child.
    const view = caseView((await loadCase(fx.db, root.caseId))!, await loadCaseDetail(fx.db, root.caseId));
    const [rootNode] = view.tasks;
    expect(rootNode!.costs).toMatchObject({ modelCalls: 3, inputTokens: 430, outputTokens: 42, cost: null });
    expect(rootNode!.children[0]!.costs).toMatchObject({ modelCalls: 1, inputTokens: 60, outputTokens: 7, cost: 0.0004 });
    expect(view.costs).toMatchObject({ modelCalls: 4, inputTokens: 490, outputTokens: 49, cost: null });
    const rootMinutes = minutes.find((m) => m.id === root.taskId)!;
    const childMinutes = minutes.find((m) => m.id === child!.id)!;
    expect(view.costs.activeMinutes).toBeCloseTo(Number(rootMinutes.used) + Number(childMinutes.used), 6);
    expect(view.costs.waitingMinutes).toBeCloseTo(Number(rootMinutes.waiting) + Number(childMinutes.waiting), 6);
  });
});
