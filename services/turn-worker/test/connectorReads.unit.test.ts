import { describe, expect, it } from 'vitest';
import { authorizeToolInvocation, EverdictError, permissionRequired, payloadHash, canonicalJson, validateToolDescriptor } from '@everdict/contracts';
import type { FleetConfig, ToolScope } from '@everdict/contracts';
import { InMemoryJournal, InMemoryResultStore, initialRunState, kernelRegistry, runTurn, testKernelClock } from '@everdict/agent-runtime';
import { routeIdentity, scriptedClient } from '@everdict/llm';
import { FleetConfigError, validateFleetConfig } from '@everdict/service-kit';
import { connectorReadTool, connectorReadTools, readInputSchema, type ReadConnector } from '../src/connectorReads.js';

const TARGET = { system: 'billing', environment: 'test' };

/** A connector answering `answer(operation, params)`; `reads` records every call. */
function fakeConnector(name: string, answer: (op: string, params: Record<string, unknown>) => Promise<unknown> | unknown, independent = true): ReadConnector & { reads: string[] } {
  const reads: string[] = [];
  const readOperations: ReturnType<ReadConnector['describe']>['readOperations'] = [
    { name: 'accounts.get', params: { accountId: { type: 'string', maxLength: 16, pattern: '[a-z0-9-]+' } }, independent },
    { name: 'accounts.list', params: { limit: { type: 'integer', minimum: 1, maximum: 50 }, region: { type: 'string', enum: ['eu', 'us'] }, id: { type: 'uuid' }, open: { type: 'boolean' } }, independent },
  ];
  return {
    name,
    reads,
    describe: () => ({ kind: 'http-service', target: TARGET, readOperations }),
    async read(operation, params, ctx) {
      reads.push(operation);
      return { operation, value: (await answer(operation, params)) as never, observedAt: ctx.clock.now().toISOString() };
    },
  };
}

const noTiming = { timing: () => undefined };
const ref = { connector: 'billing', operation: 'accounts.get' };

describe('connector read tools: descriptor and input schema', () => {
  const tool = connectorReadTool(ref, fakeConnector('billing', () => ({})), noTiming)!;

  it('is a first-party read named connector__operation, reaching the operator estate without external egress (no consent, K3)', () => {
    const d = validateToolDescriptor(tool.descriptor);
    expect(d).toMatchObject({ name: 'billing__accounts_get', access: 'read', origin: 'first_party', transport: 'remote', argumentValidation: 'kernel', independent: true, connectorRead: ref });
    expect(d.effects).toEqual({ dataAccess: { egress: 'internal' } });
    expect(permissionRequired(d)).toEqual({ required: false });
    expect(d.description).toMatch(/^[\x20-\x7e]+$/);
  });

  it('takes its input schema from the operation parameters: all required, nothing else, anchored patterns, bounds, enums, uuids', () => {
    expect(readInputSchema({ accountId: { type: 'string', maxLength: 16, pattern: '[a-z0-9-]+' } })).toEqual({
      type: 'object',
      additionalProperties: false,
      required: ['accountId'],
      properties: { accountId: { type: 'string', maxLength: 16, pattern: '^(?:[a-z0-9-]+)$' } },
    });
    const list = connectorReadTool({ connector: 'billing', operation: 'accounts.list' }, fakeConnector('billing', () => ({})), noTiming)!;
    const registry = kernelRegistry([tool, list]);
    expect(registry.argumentProblems('billing__accounts_get', { accountId: 'acct-1' })).toEqual([]);
    expect(registry.argumentProblems('billing__accounts_get', { accountId: 'ACCT 1' })).not.toEqual([]); // pattern is anchored
    expect(registry.argumentProblems('billing__accounts_get', { accountId: 'x'.repeat(17) })).not.toEqual([]);
    expect(registry.argumentProblems('billing__accounts_get', {})).not.toEqual([]);
    expect(registry.argumentProblems('billing__accounts_get', { accountId: 'a', extra: 1 })).not.toEqual([]);
    const good = { limit: 5, region: 'eu', id: '0190a4b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b', open: true };
    expect(registry.argumentProblems('billing__accounts_list', good)).toEqual([]);
    for (const bad of [{ limit: 0 }, { limit: 51 }, { limit: '5' }, { region: 'asia' }, { id: 'not-a-uuid' }, { open: 'yes' }]) {
      expect(registry.argumentProblems('billing__accounts_list', { ...good, ...bad }), JSON.stringify(bad)).not.toEqual([]);
    }
  });

  it('declares independence only when the connector does', () => {
    const serial = connectorReadTool(ref, fakeConnector('billing', () => ({}), false), noTiming)!;
    expect(serial.descriptor.independent).toBe(false);
  });

  it('has no tool for an operation the connector does not register', () => {
    expect(connectorReadTool({ connector: 'billing', operation: 'accounts.delete' }, fakeConnector('billing', () => ({})), noTiming)).toBeUndefined();
  });
});

describe('connector read tools: scope (K1 decides)', () => {
  const d = connectorReadTool(ref, fakeConnector('billing', () => ({})), noTiming)!.descriptor;
  const scope = (s: Partial<ToolScope>) => ({ scope: { reads: [], writes: [], forbidden: [], ...s } });

  it.each([
    ['the connector', ['billing'], true],
    ['the operation', ['billing/accounts.get'], true],
    ['a prefix', ['billing/*'], true],
    ['the tool name', ['billing__accounts_get'], true],
    ['another operation', ['billing/accounts.list'], false],
    ['another connector', ['estate'], false],
    ['a connector-name prefix without *', ['bill'], false],
    ['only writes', [], false],
  ] as const)('scope.reads naming %s', (_case, reads, allowed) => {
    const answer = authorizeToolInvocation(d, scope({ reads: [...reads], writes: ['billing', 'billing/*'] }));
    expect(answer).toEqual(allowed ? { allowed: true, basis: 'reads' } : { allowed: false, refusal: 'read_out_of_scope' });
  });

  it('forbidden beats the executor posture, by connector, operation or prefix', () => {
    expect(authorizeToolInvocation(d, scope({ reads: 'all' }))).toEqual({ allowed: true, basis: 'executor_posture' });
    for (const f of ['billing', 'billing/accounts.get', 'billing/*']) expect(authorizeToolInvocation(d, scope({ reads: 'all', forbidden: [f] }))).toEqual({ allowed: false, refusal: 'forbidden' });
  });

  it('the connector names widen nothing but a first-party read: a workspace tool claiming them is refused and gains nothing', () => {
    const claimed = { ...d, origin: 'workspace' as const };
    expect(() => validateToolDescriptor(claimed)).toThrow(/connectorRead/);
    expect(authorizeToolInvocation(claimed, scope({ reads: ['billing'] }))).toEqual({ allowed: false, refusal: 'read_out_of_scope' });
    expect(() => validateToolDescriptor({ ...d, access: 'write' })).toThrow(/connectorRead/);
  });
});

describe('connector read tools: results and failures', () => {
  it('returns the origin, trust, data class, content hash, size and truncation of what the connector read', async () => {
    const value = { status: 200, body: { id: 'acct-1', balanceCents: 1234, note: 'caf\u00e9' } };
    const tool = connectorReadTool(ref, fakeConnector('billing', () => value), noTiming)!;
    const out = await tool.invoke({ accountId: 'acct-1' }, { taskId: 't', turn: 0, callId: 'c' });
    expect(out.isError).toBeUndefined();
    const doc = JSON.parse(out.content) as Record<string, unknown>;
    expect(doc).toMatchObject({
      origin: { connector: 'billing', operation: 'accounts.get', target: TARGET },
      trust: 'external',
      dataClass: 'estate',
      contentHash: payloadHash(value),
      bytes: Buffer.byteLength(canonicalJson(value), 'utf8'),
      truncated: false,
      result: value,
    });
    expect(typeof doc['observedAt']).toBe('string');
  });

  it.each([
    ['a target that replied with a transient failure', new EverdictError('connector_down', 'billing: accounts.get could not be read (HTTP 503)', { retryable: true, details: { connector: 'billing', answered: true } }), /retryable.*HTTP 503.*call it again later/],
    ['a refusal before contact', new EverdictError('connector_refused', 'billing: invalid_params (/params/accountId is required)'), /refused before contacting the target.*invalid_params/],
    ['a read too large', new EverdictError('read_too_large', 'estate: sql.select returned more than 1000 rows'), /Narrow the read/],
    ['an unexpected failure', new Error('secret detail'), /failed unexpectedly/],
  ])('%s is a tool error the model sees, not a crash', async (_case, err, text) => {
    const tool = connectorReadTool(ref, fakeConnector('billing', () => Promise.reject(err)), noTiming)!;
    const out = await tool.invoke({ accountId: 'acct-1' }, { taskId: 't', turn: 0, callId: 'c' });
    expect(out.isError).toBe(true);
    expect(out.content).toMatch(text);
    expect(out.content).not.toContain('secret detail');
  });

  it('a target that gave no reply is thrown on as connector_down, for the kernel to treat as that park class', async () => {
    const down = new EverdictError('connector_down', 'billing: accounts.get could not be read (connect ECONNREFUSED)', { retryable: true, details: { connector: 'billing', answered: false } });
    const tool = connectorReadTool(ref, fakeConnector('billing', () => Promise.reject(down)), noTiming)!;
    await expect(tool.invoke({ accountId: 'acct-1' }, { taskId: 't', turn: 0, callId: 'c' })).rejects.toBe(down);
  });

  it('adds its time to the running turn (tool time is not runtime overhead)', async () => {
    let ms = -1;
    const tool = connectorReadTool(ref, fakeConnector('billing', () => ({})), { timing: () => ({ addToolMs: (x: number) => void (ms = x) }) })!;
    await tool.invoke({ accountId: 'a' }, { taskId: 't', turn: 0, callId: 'c' });
    expect(ms).toBeGreaterThanOrEqual(0);
  });
});

describe('connector reads in a turn', () => {
  /** Two reads that each wait until both have started: they finish only if they run side by side. */
  async function turnOf(independent: boolean) {
    let started = 0;
    let release: () => void = () => undefined;
    const both = new Promise<void>((r) => (release = r));
    const answer = async (op: string) => {
      if (++started === 2) release();
      const waited = await Promise.race([both.then(() => 'together'), new Promise<string>((r) => setTimeout(() => r('alone'), 300))]);
      return { op, waited };
    };
    const billing = fakeConnector('billing', answer, independent);
    const tools = [connectorReadTool(ref, billing, noTiming)!, connectorReadTool({ connector: 'billing', operation: 'accounts.list' }, billing, noTiming)!];
    const model = scriptedClient({
      route: routeIdentity('t', { adapter: 'scripted', model: 'script-t', scriptPath: 't.json' }),
      script: { steps: [{ toolCalls: [{ name: 'billing__accounts_get', arguments: { accountId: 'a' } }, { name: 'billing__accounts_list', arguments: { limit: 1, region: 'eu', id: '0190a4b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b', open: false } }] }, { text: 'done' }] },
    });
    const journal = new InMemoryJournal();
    const ctx = { taskId: 'task', systemPrompt: null, envelope: { scope: { reads: ['billing/*'], writes: [], forbidden: [] }, budget: {} }, depth: 0 };
    const result = await runTurn({ model, journal, tools: kernelRegistry(tools), results: new InMemoryResultStore(), clock: testKernelClock() }, ctx, initialRunState('task', 'read'));
    const waited = result.state.messages.filter((m) => m.role === 'tool').map((m) => (JSON.parse(m.content) as { result: { waited: string } }).result.waited);
    return { waited, rows: journal.all().map((r) => [r.ordinal, r.name, r.status]) };
  }

  it('independent reads of one turn run side by side; each is journalled under task + turn + ordinal', async () => {
    const { waited, rows } = await turnOf(true);
    expect(waited).toEqual(['together', 'together']);
    expect(rows).toEqual([
      [0, 't', 'completed'],
      [1, 'billing__accounts_get', 'completed'],
      [2, 'billing__accounts_list', 'completed'],
    ]);
  });

  it('reads the connector does not declare independent run in recorded order', async () => {
    // The first read ended (alone) before the second began.
    expect((await turnOf(false)).waited).toEqual(['alone', 'together']);
  });
});

describe('connector reads in the fleet config', () => {
  const base = (reads: string[], extra: Partial<FleetConfig> = {}): unknown => ({
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'm', scriptPath: 's.json' } },
    profiles: { p: { version: '1', route: 'r', prompt: 'x', reads } },
    caseTypes: { t: { rootProfile: 'p', scope: { reads: ['billing/*'], writes: [], forbidden: [] } } },
    connectors: {
      billing: {
        kind: 'http',
        target: { system: 'billing', environment: 'test' },
        baseUrl: 'http://127.0.0.1:9/api',
        receipts: { path: '/receipts/{idempotencyKey}', conclusive: true },
        operations: {
          'accounts.get': { access: 'read', method: 'GET', path: '/accounts' },
          'accounts_get': { access: 'read', method: 'GET', path: '/accounts' },
          'accounts.credit': { access: 'write', effectClass: 'payment', method: 'POST', path: '/credit' },
        },
      },
    },
    ...extra,
  });
  const problems = (value: unknown) => {
    try {
      validateFleetConfig(value);
      return [];
    } catch (err) {
      if (err instanceof FleetConfigError) return err.problems.map((p) => `${p.path} ${p.message}`);
      throw err;
    }
  };

  it('accepts declared reads, and the tools are built per listed entry from the connector set', () => {
    const config = validateFleetConfig(base(['billing/accounts.get']));
    const tools = connectorReadTools(config, { get: (n) => (n === 'billing' ? fakeConnector('billing', () => ({})) : undefined) }, noTiming);
    expect([...tools.keys()]).toEqual(['billing/accounts.get']);
    expect(tools.get('billing/accounts.get')!.descriptor.name).toBe('billing__accounts_get');
    expect(connectorReadTools(config, undefined, noTiming).size).toBe(0);
  });

  it('refuses an undeclared connector or operation, a write, and colliding tool names, each at its path', () => {
    expect(problems(base(['crm/contacts.get', 'billing/accounts.missing', 'billing/accounts.credit']))).toEqual([
      '/profiles/p/reads/0 names a connector that connectors does not declare',
      '/profiles/p/reads/1 names an operation connectors.billing.operations does not declare',
      '/profiles/p/reads/2 names a write; writes go through writes__propose',
    ]);
    expect(problems(base(['billing/accounts.get', 'billing/accounts_get']))).toEqual(['/profiles/p/reads/1 derives the tool name billing__accounts_get, as "billing/accounts.get" does']);
    expect(problems(base(['billing/accounts.get'], { tools: { billing__accounts_get: { builtin: 'static', description: 'x' } } }))).toEqual([
      '/profiles/p/reads/0 derives the tool name billing__accounts_get, which tools already declares',
    ]);
    expect(problems(base(['no-slash']))[0]).toMatch(/^\/profiles\/p\/reads\/0 /);
  });
});
