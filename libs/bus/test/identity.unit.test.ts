import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MESSAGE_TYPE_NAMES, PRODUCER_TYPES, PRODUCING_SERVICES, emitPattern, mayEmit } from '@everdict/contracts';
import { IN_PROCESS_IDENTITY, authenticateProducer, brokerLogin, loadTopology, parseAmqpUsers, perServiceIdentity, servicePermissions, sharedIdentity } from '../src/index.js';

const USERS = 'intake=ev-in,turn-worker=ev-tw,gate=ev-gate,execution-coordinator=ev-ec,reconciler=ev-rec';

describe('producer authentication', () => {
  const perService = perServiceIdentity(parseAmqpUsers(USERS));

  it('accepts a user speaking for its own service a type that service emits', () => {
    expect(authenticateProducer(perService, 'ev-in', 'intake', 'task.cancel')).toBeNull();
    expect(authenticateProducer(perService, 'ev-gate', 'gate', 'gate.decided')).toBeNull();
  });

  it('refuses a missing, unknown or mismatched user, and a type the sender does not emit', () => {
    expect(authenticateProducer(perService, undefined, 'intake', 'task.runnable')?.reason).toBe('producer_unauthenticated');
    expect(authenticateProducer(perService, 'guest', 'intake', 'task.runnable')?.reason).toBe('producer_unknown');
    // The coordinator's credentials claiming to be the gate.
    expect(authenticateProducer(perService, 'ev-ec', 'gate', 'gate.decided')).toMatchObject({ reason: 'sender_mismatch', detail: expect.stringContaining('/sender/service') });
    // A made-up `operator` sender, even on a user that speaks for every service.
    expect(authenticateProducer(sharedIdentity('guest'), 'guest', 'operator', 'budget.topped_up')?.reason).toBe('sender_mismatch');
    expect(authenticateProducer(sharedIdentity('guest'), 'guest', 'execution-coordinator', 'task.cancel')?.reason).toBe('type_not_permitted');
    expect(authenticateProducer(IN_PROCESS_IDENTITY, 'intake', 'intake', 'effect.outcome')?.reason).toBe('type_not_permitted');
    expect(authenticateProducer(IN_PROCESS_IDENTITY, 'intake', 'turn-worker', 'task.finished')?.reason).toBe('sender_mismatch');
  });

  it('the producer table names only known types, and only the five services emit', () => {
    for (const types of Object.values(PRODUCER_TYPES)) for (const t of types) expect(MESSAGE_TYPE_NAMES).toContain(t);
    expect(PRODUCER_TYPES.operator).toEqual([]);
    expect(mayEmit('nobody', 'task.runnable')).toBe(false);
    expect(emitPattern('execution-coordinator')).toBe('^(effect\\.outcome)$');
  });
});

describe('EVERDICT_AMQP_USERS and logins', () => {
  it('needs every service exactly once, each with its own user', () => {
    expect(() => parseAmqpUsers('intake=a')).toThrow(/turn-worker/);
    expect(() => parseAmqpUsers(`${USERS},intake=x`)).toThrow(/twice/);
    expect(() => parseAmqpUsers(USERS.replace('ev-rec', 'ev-gate'))).toThrow(/two services/);
    expect(() => parseAmqpUsers(`${USERS},operator=op`)).toThrow(/not a service/);
  });

  it('shared without EVERDICT_AMQP_USERS; per service with a password per service of the node', () => {
    expect(brokerLogin({}, 'amqp://guest:guest@h:5672', ['intake']).login).toEqual({ mode: 'shared', url: 'amqp://guest:guest@h:5672' });
    const missing = brokerLogin({ EVERDICT_AMQP_USERS: USERS }, 'amqp://h:5672', ['intake', 'gate']);
    expect(missing.problems.map((p) => p.name)).toEqual(['EVERDICT_AMQP_PASSWORD_INTAKE', 'EVERDICT_AMQP_PASSWORD_GATE']);
    const ok = brokerLogin({ EVERDICT_AMQP_USERS: USERS, EVERDICT_AMQP_PASSWORD_TURN_WORKER: 'p/w' }, 'amqp://ev-in:pi@h1:5672,amqp://h2:5672', ['intake', 'turn-worker']);
    expect(ok.problems).toEqual([]);
    expect(ok.login).toMatchObject({ mode: 'per_service', urls: { intake: 'amqp://ev-in:pi@h1:5672,amqp://ev-in:pi@h2:5672', 'turn-worker': 'amqp://ev-tw:p%2Fw@h1:5672,amqp://ev-tw:p%2Fw@h2:5672' } });
  });
});

describe('broker permissions', () => {
  it('infra/rabbitmq/compose-users.json grants exactly servicePermissions, and holds no password', () => {
    const file = JSON.parse(readFileSync(new URL('../../../infra/rabbitmq/compose-users.json', import.meta.url), 'utf8')) as {
      users: { name: string; password_hash: string }[];
      permissions: { user: string; configure: string; write: string; read: string }[];
      topic_permissions: { user: string; exchange: string; write: string; read: string }[];
    };
    const t = loadTopology();
    expect(file.users.map((u) => u.name)).toEqual(PRODUCING_SERVICES.map((s) => `everdict-${s}`));
    for (const u of file.users) expect(u.password_hash).toBe('');
    for (const s of PRODUCING_SERVICES) {
      const p = servicePermissions(t, s);
      expect(file.permissions.find((x) => x.user === `everdict-${s}`)).toMatchObject({ configure: p.configure, write: p.write, read: p.read });
      expect(file.topic_permissions.find((x) => x.user === `everdict-${s}`)).toMatchObject({ exchange: p.topic.exchange, write: p.topic.write, read: p.topic.read });
    }
  });

  it('a service may configure only its own queues and publish only the types it emits', () => {
    const t = loadTopology({ prefix: 'px' });
    const gate = servicePermissions(t, 'gate');
    expect(new RegExp(gate.configure).test('px.gate')).toBe(true);
    expect(new RegExp(gate.configure).test('px.turn-worker')).toBe(false);
    expect(new RegExp(gate.configure).test('px.events')).toBe(false);
    expect(new RegExp(gate.topic.write).test('gate.decided')).toBe(true);
    expect(new RegExp(gate.topic.write).test('effect.outcome')).toBe(false);
    expect(servicePermissions(t, 'intake')).toMatchObject({ configure: '^$', read: '^$', write: '^(px\\.events)$' });
  });
});
