/**
 * Preconditions and assertions: mechanical checks that read through a registered read operation
 * and compare one value by canonical JSON equality. Evaluation is pure; running them is a
 * sequence of reads through whatever `read` function the connector supplies.
 */
import type { EffectCheck, EffectPacket, EffectParams } from '@everdict/contracts';
import { canonicalJson } from '@everdict/contracts';
import { admitPacket } from './admission.js';
import type { CheckMismatch, CheckOutcome, Connector, ConnectorCapability, ConnectorContext, JsonValue, PreflightResult, ReadResult } from './connector.js';

/** RFC 6901 JSON Pointer lookup. `found: false` when any step is missing. */
export function resolvePointer(value: JsonValue, pointer: string): { found: true; value: JsonValue } | { found: false } {
  if (pointer === '') return { found: true, value };
  if (!pointer.startsWith('/')) return { found: false };
  let current: JsonValue = value;
  for (const raw of pointer.slice(1).split('/')) {
    const token = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(current)) {
      if (!/^(0|[1-9][0-9]*)$/.test(token)) return { found: false };
      const next: JsonValue | undefined = current[Number(token)];
      if (next === undefined) return { found: false };
      current = next;
    } else if (current !== null && typeof current === 'object') {
      if (!Object.hasOwn(current, token)) return { found: false };
      current = current[token] as JsonValue;
    } else {
      return { found: false };
    }
  }
  return { found: true, value: current };
}

/** Compares each check with the value its read returned (same order). */
export function evaluateChecks(checks: readonly EffectCheck[], observed: readonly JsonValue[]): CheckOutcome {
  if (checks.length !== observed.length) throw new RangeError('evaluateChecks: one observed value per check');
  const mismatches: CheckMismatch[] = [];
  checks.forEach((check, i) => {
    const expected = check.equals as JsonValue;
    const hit = resolvePointer(observed[i] as JsonValue, check.pointer);
    if (!hit.found) mismatches.push({ id: check.id, pointer: check.pointer, expected, observed: undefined });
    else if (canonicalJson(hit.value) !== canonicalJson(expected)) mismatches.push({ id: check.id, pointer: check.pointer, expected, observed: hit.value });
  });
  const checked = checks.map((c) => c.id);
  return mismatches.length === 0 ? { status: 'holds', checked } : { status: 'violated', checked, mismatches };
}

type ReadFn = (operation: string, params: EffectParams, ctx: ConnectorContext) => Promise<ReadResult>;

/** Runs each check's read in order, then evaluates. Read failures propagate (ConnectorUnavailable). */
async function runChecks(read: ReadFn, checks: readonly EffectCheck[], ctx: ConnectorContext): Promise<CheckOutcome> {
  const observed: JsonValue[] = [];
  for (const check of checks) observed.push((await read(check.read.operation, check.read.params, ctx)).value);
  return evaluateChecks(checks, observed);
}

/** Preflight as every connector does it: admit the packet, then re-read its preconditions. */
export async function preflightChecks(capability: ConnectorCapability, read: ReadFn, packet: EffectPacket, ctx: ConnectorContext): Promise<PreflightResult> {
  admitPacket(capability, packet);
  const outcome = await runChecks(read, packet.preconditions, ctx);
  return outcome.status === 'holds'
    ? { status: 'unchanged', checked: outcome.checked }
    : { status: 'preflight_changed', checked: outcome.checked, changed: outcome.mismatches };
}

/** The post-check: re-reads the packet's assertions after an established outcome. */
export async function checkAssertions(connector: Connector, packet: EffectPacket, ctx: ConnectorContext): Promise<CheckOutcome> {
  admitPacket(connector.describe(), packet);
  return runChecks((op, params, c) => connector.read(op, params, c), packet.assertions, ctx);
}
