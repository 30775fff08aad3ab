/**
 * The topology services assert is exactly rabbitmq/definitions.json, under any prefix, and it
 * has the shape DESIGN §3 asks for: one topic exchange, one quorum queue per consuming service
 * with a delivery limit, a dead-letter exchange and a quorum dead-letter queue per service.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MESSAGE_TYPE_NAMES } from '@everdict/contracts';
import type { TopologyChannel } from '../src/topology.js';
import {
  TopologyError,
  assertTopology,
  boundTypes,
  consumingServices,
  deadLetterQueue,
  deliveryLimit,
  eventsExchange,
  findDefinitionsFile,
  loadTopology,
  parseDefinitions,
  route,
  topicMatches,
  withPrefix,
} from '../src/topology.js';

interface RawDefs {
  exchanges: { name: string; type: string; durable: boolean; auto_delete: boolean; internal: boolean; arguments: Record<string, unknown> }[];
  queues: { name: string; durable: boolean; auto_delete: boolean; arguments: Record<string, unknown> }[];
  bindings: { source: string; destination: string; routing_key: string; arguments: Record<string, unknown> }[];
}

const raw = JSON.parse(readFileSync(findDefinitionsFile(), 'utf8')) as RawDefs;

/** Records what assertTopology asks of a channel, in the definitions file's own vocabulary. */
function recorder() {
  const calls = { exchanges: [] as unknown[], queues: [] as unknown[], bindings: [] as unknown[] };
  const ch: TopologyChannel = {
    assertExchange: async (name, type, o) => void calls.exchanges.push({ name, type, durable: o.durable, auto_delete: o.autoDelete, internal: o.internal, arguments: o.arguments }),
    assertQueue: async (name, o) => void calls.queues.push({ name, durable: o.durable, auto_delete: o.autoDelete, exclusive: o.exclusive, arguments: o.arguments }),
    bindQueue: async (queue, source, pattern, args) => void calls.bindings.push({ source, destination: queue, routing_key: pattern, arguments: args }),
    checkExchange: async () => undefined,
    checkQueue: async () => undefined,
  };
  return { ch, calls };
}

describe('topology', () => {
  it('asserts exactly what definitions.json declares, argument for argument', async () => {
    const { ch, calls } = recorder();
    await assertTopology(ch, loadTopology());
    expect(calls.exchanges).toEqual(raw.exchanges.map(({ name, type, durable, auto_delete, internal, arguments: a }) => ({ name, type, durable, auto_delete, internal, arguments: a })));
    expect(calls.queues).toEqual(raw.queues.map(({ name, durable, auto_delete, arguments: a }) => ({ name, durable, auto_delete, exclusive: false, arguments: a })));
    expect(calls.bindings).toEqual(raw.bindings.map(({ source, destination, routing_key, arguments: a }) => ({ source, destination, routing_key, arguments: a })));
  });

  it('renames every name, and the dead-letter exchange argument, under a prefix', async () => {
    const { ch, calls } = recorder();
    const t = loadTopology({ prefix: 't_abc' });
    await assertTopology(ch, t);
    const text = JSON.stringify(calls);
    expect(text).not.toContain('everdict.');
    expect(calls.queues).toHaveLength(raw.queues.length);
    expect(t.queues.find((q) => q.name === 't_abc.gate')!.arguments['x-dead-letter-exchange']).toBe('t_abc.dlx');
    expect(eventsExchange(t)).toBe('t_abc.events');
    expect(deadLetterQueue(t, 'gate')).toBe('t_abc.gate.dead');
    expect(() => withPrefix(t, 'bad prefix!')).toThrow(TopologyError);
  });

  it('has one quorum queue with a delivery limit and a quorum dead-letter queue per consuming service', () => {
    const t = loadTopology();
    expect(eventsExchange(t)).toBe('everdict.events');
    expect(t.exchanges.find((e) => e.name === 'everdict.events')!.type).toBe('topic');
    expect(consumingServices(t).sort()).toEqual(['execution-coordinator', 'gate', 'reconciler', 'turn-worker']);
    for (const service of consumingServices(t)) {
      const q = t.queues.find((x) => x.name === `everdict.${service}`)!;
      expect(q.durable).toBe(true);
      expect(q.arguments['x-queue-type']).toBe('quorum');
      expect(deliveryLimit(t, service)).toBeGreaterThan(0);
      const dead = t.queues.find((x) => x.name === deadLetterQueue(t, service))!;
      expect(dead.name).toBe(`everdict.${service}.dead`);
      expect(dead.arguments['x-queue-type']).toBe('quorum');
    }
  });

  it('binds each service to the message types of DESIGN §2, and routes every message type somewhere', () => {
    const t = loadTopology();
    expect(boundTypes(t, 'turn-worker').sort()).toEqual(
      ['budget.topped_up', 'effect.outcome', 'gate.decided', 'plan.submitted', 'question.answered', 'question.raised', 'task.cancel', 'task.dead_end', 'task.finished', 'task.resume', 'task.runnable'].sort(),
    );
    expect(boundTypes(t, 'gate')).toEqual(['gate.requested']);
    expect(boundTypes(t, 'execution-coordinator')).toEqual(['gate.decided']);
    expect(boundTypes(t, 'reconciler')).toEqual(['effect.outcome']);
    for (const type of MESSAGE_TYPE_NAMES) expect(route(t, 'everdict.events', type).length, type).toBeGreaterThan(0);
    expect(route(t, 'everdict.events', 'gate.decided').sort()).toEqual(['everdict.execution-coordinator', 'everdict.turn-worker']);
    expect(route(t, 'everdict.events', 'no.such.type')).toEqual([]);
  });

  it('matches topic patterns as the broker does', () => {
    const cases: [string, string, boolean][] = [
      ['task.runnable', 'task.runnable', true],
      ['task.*', 'task.runnable', true],
      ['task.*', 'task.runnable.v1', false],
      ['task.#', 'task', true],
      ['task.#', 'task.runnable.v1', true],
      ['#', 'anything.at.all', true],
      ['*.decided', 'gate.decided', true],
      ['*.decided', 'decided', false],
      ['#.decided', 'decided', true],
      ['gate.#.x', 'gate.a.b.x', true],
      ['gate.#.x', 'gate.a.b.y', false],
    ];
    for (const [pattern, key, want] of cases) expect(topicMatches(pattern, key), `${pattern} ~ ${key}`).toBe(want);
  });

  it('rejects a malformed definitions document naming the field', () => {
    const bad = JSON.parse(JSON.stringify(raw)) as RawDefs;
    bad.bindings[0]!.destination = 'everdict.nowhere';
    expect(() => parseDefinitions(bad)).toThrow(/bindings\[0\]\.destination/);
    const foreign = JSON.parse(JSON.stringify(raw)) as RawDefs;
    foreign.queues[0]!.name = 'other.queue';
    try {
      parseDefinitions(foreign);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(TopologyError);
      expect((err as TopologyError).details['field']).toBe('queues[0].name');
    }
  });
});
