import { describe, expect, it } from 'vitest';
import { MESSAGE_TYPE_NAMES, TRUST_LABELS, trustLabelFor } from '@everdict/contracts';

describe('trustLabelFor: the label comes from where the content came from', () => {
  it('labels model-written payloads agent, whoever relays them', () => {
    for (const type of ['plan.submitted', 'question.raised', 'gate.requested'] as const) {
      expect(trustLabelFor(type, {}, 'task')).toBe('agent');
      expect(trustLabelFor(type, {}, 'service')).toBe('agent');
    }
    expect(trustLabelFor('task.finished', { outcome: 'completed', summary: 'done' }, 'task')).toBe('agent');
    expect(trustLabelFor('task.finished', { outcome: 'failed' }, 'task')).toBe('agent');
    expect(trustLabelFor('question.answered', { answer: 'yes' }, 'task')).toBe('agent');
  });

  it('labels content from a target external', () => {
    expect(trustLabelFor('effect.outcome', { outcome: 'applied', receipt: { id: 'r1' } }, 'service')).toBe('external');
  });

  it('keeps platform for what the runtime makes itself', () => {
    expect(trustLabelFor('task.runnable', { reason: 'opened' }, 'task')).toBe('platform');
    expect(trustLabelFor('task.runnable', { reason: 'retry' }, 'service')).toBe('platform');
    expect(trustLabelFor('gate.decided', { outcome: 'approved' }, 'service')).toBe('platform');
    expect(trustLabelFor('task.finished', { outcome: 'cancelled', summary: 'cancelled' }, 'task')).toBe('platform');
    expect(trustLabelFor('effect.outcome', { outcome: 'refused' }, 'service')).toBe('platform');
    expect(trustLabelFor('question.answered', { answer: 'yes' }, 'service')).toBe('platform');
    for (const type of ['task.cancel', 'task.resume', 'budget.topped_up'] as const) expect(trustLabelFor(type, {}, 'service')).toBe('platform');
  });

  it('gives every message kind a label', () => {
    for (const type of MESSAGE_TYPE_NAMES) {
      expect(TRUST_LABELS).toContain(trustLabelFor(type, {}, 'task'));
      expect(TRUST_LABELS).toContain(trustLabelFor(type, {}, 'service'));
    }
  });
});
