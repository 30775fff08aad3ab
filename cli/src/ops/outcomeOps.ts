/**
 * `outcome <callId> --applied|--not-applied|--partly-applied --evidence TEXT [--proof PAPER]`:
 * records what landed for an effect call in doubt (seed 004 §7) through the gate API as the
 * token's principal. The server decides who may (role operator, or a role that decided the
 * call's gate) and what it means: only applied / not applied settle the call and release its
 * impact keys; partly applied keeps them held for an operator.
 */
import { UsageError } from '../args.js';
import { emit } from '../output.js';
import { request } from './client.js';
import type { ApiTarget } from './client.js';

export interface OutcomeFlags {
  readonly applied?: boolean;
  readonly 'not-applied'?: boolean;
  readonly 'partly-applied'?: boolean;
  readonly evidence?: string;
  readonly proof?: string;
}

/** The request body from the flags: exactly one outcome flag and non-empty evidence. Pure. */
export function outcomeBody(a: OutcomeFlags): { outcome: string; evidence: string; proof?: string } {
  const chosen = (
    [
      ['applied', 'applied'],
      ['not-applied', 'not_applied'],
      ['partly-applied', 'partly_applied'],
    ] as const
  ).filter(([flag]) => a[flag] === true);
  if (chosen.length !== 1) throw new UsageError('outcome needs exactly one of --applied, --not-applied, --partly-applied');
  if (a.evidence === undefined || a.evidence.trim() === '') throw new UsageError('outcome needs --evidence TEXT: what was checked, and how');
  return { outcome: chosen[0]![1], evidence: a.evidence, ...(a.proof === undefined ? {} : { proof: a.proof }) };
}

export async function outcomeCommand(t: ApiTarget, callId: string, a: OutcomeFlags, json: boolean): Promise<number> {
  const r = await request<Record<string, unknown>>(t.gateUrl, t.token, 'POST', `/v1/effects/${callId}/outcome`, outcomeBody(a));
  emit(json, r, () => {
    const what = `call ${decodeURIComponent(callId)}: ${String(r['outcome'])} recorded by ${String(r['recordedBy'])}`;
    return r['conclusive'] === true ? `${what}; the call settles (impact keys released, task woken)` : `${what}; not conclusive: impact keys stay held for an operator`;
  });
  return 0;
}
