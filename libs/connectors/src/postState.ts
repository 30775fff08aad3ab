/**
 * Post-state reads (seed 004 §7): a mutation may state the exact state its target shows once it
 * landed. When no receipt answers conclusively, WhatLanded reads that state: an exact match is
 * proof of `applied`; anything else proves nothing — the state may be another writer's, or have
 * moved on — so it never becomes `not_applied`. Pure: the read itself is the connector's.
 */
import type { EffectParams } from '@everdict/contracts';
import { canonicalJson } from '@everdict/contracts';
import { resolvePointer } from './checks.js';
import type { JsonValue } from './connector.js';

export interface PostStateSpec {
  readonly read: string;
  readonly params?: Readonly<Record<string, string | number | boolean | undefined>>;
  readonly pointer: string;
  readonly equals: JsonValue;
}

const PLACEHOLDER = /^\{\{([^{}]+)\}\}$/;

/** A string that is exactly "{{param}}" becomes the mutation's bound value; nothing else changes. */
function bind(value: JsonValue, params: EffectParams): JsonValue {
  const name = typeof value === 'string' ? PLACEHOLDER.exec(value)?.[1] : undefined;
  if (name === undefined) return value;
  const bound = params[name];
  return bound === undefined ? value : (bound as JsonValue);
}

/** The read's parameters and the expected value, bound from the mutation's parameters. */
export function bindPostState(spec: PostStateSpec, params: EffectParams): { params: EffectParams; equals: JsonValue } {
  const readParams = Object.fromEntries(Object.entries(spec.params ?? {}).flatMap(([k, v]) => (v === undefined ? [] : [[k, bind(v, params)]]))) as EffectParams;
  return { params: readParams, equals: bind(spec.equals, params) };
}

/** Whether the read result shows exactly the expected state, and what it showed. */
export function postStateHolds(result: JsonValue, pointer: string, equals: JsonValue): { holds: boolean; observed: JsonValue | null } {
  const hit = resolvePointer(result, pointer);
  if (!hit.found) return { holds: false, observed: null };
  return { holds: canonicalJson(hit.value) === canonicalJson(equals), observed: hit.value };
}
