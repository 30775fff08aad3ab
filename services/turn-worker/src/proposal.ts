/**
 * `writes.propose` as pure decisions (DESIGN §6, seed 004 §2.2, §5): the model's proposal →
 * returned ids resolved → mechanical checks → an effect packet; and what an earlier proposal of
 * the same mutation means for this one. No I/O here: the tool (writesPropose.ts) reads the
 * database and calls the auditor, then asks these functions what to do.
 *
 * The model calls `writes__propose` — the provider-safe spelling of DESIGN's `writes.propose`
 * (function names may not contain dots). It never names a mutating connector tool: there is none.
 *
 * Invariants:
 * - a packet binds every parameter exactly: a reference to an earlier step's returned id is
 *   replaced by the value before the packet exists, so the auditor, the gate and the digest all
 *   see the value that will be sent;
 * - a proposal outside the case's write scope, of an unregistered operation, with a parameter
 *   out of bounds, without a revert or without a target identity never becomes a packet;
 * - a new tool-call id never makes a second operation: the mutation key (case + plan step +
 *   semantic hash) finds the earlier receipt, the unknown outcome, or the gate already asked;
 * - cited evidence is part of the packet (and so of its digest) but not of what the effect does:
 *   re-proposing the same change with other evidence is the same mutation.
 */
import { scopeEntryMatches, validatePacket } from '@everdict/contracts';
import { declaredTemplateHash } from '@everdict/connectors';
import type { EffectCheck, EffectPacket, EffectRevert, EvidenceCitation, ExecutionEnvelope, FleetConfig, FleetConnector, FleetOperation, FleetParamBound } from '@everdict/contracts';

export const PROPOSE_TOOL = 'writes__propose';

/** A parameter the model may leave to the runtime: the id an earlier plan step's effect returned. */
export interface StepRef {
  readonly fromStep: string;
  /** JSON Pointer into that step's receipt, e.g. "/ticketId". */
  readonly pointer: string;
}

export interface ProposalArgs {
  readonly planStepId: string;
  readonly connector: string;
  readonly operation: string;
  readonly params: Readonly<Record<string, string | number | boolean | StepRef>>;
  readonly summary: string;
  readonly revert: EffectRevert;
  readonly expectedCounts?: Readonly<Record<string, number>>;
  readonly preconditions?: readonly EffectCheck[];
  readonly assertions?: readonly EffectCheck[];
  readonly impactKeys?: readonly string[];
  /** Citations (evidence.ts): tool-call ids of this task's completed reads, journal call ids, paper refs. */
  readonly evidence?: readonly string[];
}

const PLAN_STEP = '^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$';
const scalar = { type: ['string', 'number', 'boolean'] };

/** The tool's input schema (the kernel validates arguments against it before the handler runs). */
export const PROPOSE_INPUT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['planStepId', 'connector', 'operation', 'params', 'summary', 'revert'],
  properties: {
    planStepId: { type: 'string', pattern: PLAN_STEP, description: 'The plan step this write realises (stable across re-plans).' },
    connector: { type: 'string', minLength: 1, maxLength: 64 },
    operation: { type: 'string', minLength: 1, maxLength: 128 },
    params: {
      type: 'object',
      maxProperties: 64,
      additionalProperties: {
        anyOf: [
          scalar,
          {
            type: 'object',
            additionalProperties: false,
            required: ['fromStep', 'pointer'],
            properties: { fromStep: { type: 'string', pattern: PLAN_STEP }, pointer: { type: 'string', maxLength: 512 } },
            description: "The id an earlier plan step's effect returned: resolved from its receipt before audit.",
          },
        ],
      },
    },
    summary: { type: 'string', minLength: 1, maxLength: 4000 },
    revert: {
      type: 'object',
      required: ['kind', 'description'],
      properties: { kind: { enum: ['operation', 'manual', 'irreversible'] }, description: { type: 'string', minLength: 1, maxLength: 2000 }, operation: { type: 'string' }, params: { type: 'object' } },
    },
    expectedCounts: { type: 'object', additionalProperties: { type: 'integer', minimum: 0 } },
    preconditions: { type: 'array', maxItems: 32, items: { type: 'object' } },
    assertions: { type: 'array', maxItems: 32, items: { type: 'object' } },
    impactKeys: { type: 'array', maxItems: 32, items: { type: 'string', minLength: 1, maxLength: 256 } },
    evidence: {
      type: 'array',
      maxItems: 8,
      items: { type: 'string', minLength: 1, maxLength: 512 },
      description:
        'Evidence for the independent auditor, as citations (not prose): the tool-call id of a read you made in this task that ' +
        'completed (the id of your own tool call), or a paper ref you may read (e.g. "result:<id>"). The auditor sees each cited ' +
        'result with its origin, never your conversation.',
    },
  },
} as const;

export const PROPOSE_DESCRIPTION =
  'Propose one write to a registered connector operation. Nothing is executed by this call: the exact packet is audited, ' +
  'then role holders approve or reject it; your task waits until the effect has landed (or was refused) and you are told. ' +
  'Proposing the same change again returns the recorded result instead of a second operation. ' +
  'Cite the reads the change relies on in `evidence` by the ids of your own tool calls: the auditor is shown those results with their origin.';

const isStepRef = (v: unknown): v is StepRef => typeof v === 'object' && v !== null && typeof (v as StepRef).fromStep === 'string' && typeof (v as StepRef).pointer === 'string';

/** Reads `pointer` (RFC 6901) in `doc`; undefined when a segment is missing. */
function readPointer(doc: unknown, pointer: string): unknown {
  if (pointer === '') return doc;
  if (!pointer.startsWith('/')) return undefined;
  let cur: unknown = doc;
  for (const raw of pointer.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = Array.isArray(cur) ? cur[Number(seg)] : (cur as Record<string, unknown>)[seg];
  }
  return cur;
}

type Resolution = { readonly ok: true; readonly params: Record<string, string | number | boolean> } | { readonly ok: false; readonly problems: readonly string[] };

/**
 * Replaces every step reference by the value at its pointer in that step's receipt. `receipts`
 * holds the receipt of each referenced step that has an applied effect (absent: none yet).
 */
export function resolveStepRefs(params: ProposalArgs['params'], receipts: ReadonlyMap<string, Record<string, unknown> | undefined>): Resolution {
  const out: Record<string, string | number | boolean> = {};
  const problems: string[] = [];
  for (const [name, value] of Object.entries(params)) {
    if (!isStepRef(value)) {
      out[name] = value;
      continue;
    }
    const receipt = receipts.get(value.fromStep);
    if (receipt === undefined) {
      problems.push(`params.${name}: plan step ${value.fromStep} has no applied effect to take an id from`);
      continue;
    }
    const found = readPointer(receipt, value.pointer);
    if (typeof found === 'string' || typeof found === 'number' || typeof found === 'boolean') out[name] = found;
    else problems.push(`params.${name}: the receipt of plan step ${value.fromStep} has no scalar at ${value.pointer}`);
  }
  return problems.length === 0 ? { ok: true, params: out } : { ok: false, problems };
}

/** Steps whose receipts the params reference. */
export const referencedSteps = (params: ProposalArgs['params']): string[] => [...new Set(Object.values(params).filter(isStepRef).map((r) => r.fromStep))];

/**
 * Scope of a write (K1 vocabulary): an entry of `scope.writes` names a connector (`billing`),
 * one operation (`billing/accounts.credit`) or a prefix (`billing/*`); `forbidden` beats both.
 */
export function writeInScope(envelope: Pick<ExecutionEnvelope, 'scope'>, connector: string, operation: string): { allowed: boolean; why: string } {
  const names = [connector, `${connector}/${operation}`];
  const hit = (list: readonly string[]) => names.some((n) => list.some((e) => scopeEntryMatches(e, n)));
  if (hit(envelope.scope.forbidden)) return { allowed: false, why: `${connector}/${operation} is forbidden for this case` };
  if (!hit(envelope.scope.writes)) return { allowed: false, why: `${connector}/${operation} is outside the case's write scope` };
  return { allowed: true, why: '' };
}

function boundProblems(name: string, value: string | number | boolean, bound: FleetParamBound): string[] {
  const p: string[] = [];
  const field = `params.${name}`;
  switch (bound.type) {
    case 'string':
      if (typeof value !== 'string') return [`${field} must be a string`];
      if (bound.maxLength !== undefined && value.length > bound.maxLength) p.push(`${field} is longer than ${bound.maxLength}`);
      if (bound.pattern !== undefined && !new RegExp(`^(?:${bound.pattern})$`).test(value)) p.push(`${field} does not match its pattern`);
      break;
    case 'integer':
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value) || (bound.type === 'integer' && !Number.isInteger(value))) return [`${field} must be ${bound.type === 'integer' ? 'an integer' : 'a number'}`];
      if (bound.minimum !== undefined && value < bound.minimum) p.push(`${field} is below ${bound.minimum}`);
      if (bound.maximum !== undefined && value > bound.maximum) p.push(`${field} is above ${bound.maximum}`);
      break;
    case 'boolean':
      if (typeof value !== 'boolean') p.push(`${field} must be a boolean`);
      break;
  }
  return p;
}

/** Binds `{param}` placeholders of impact-key templates; a placeholder without a value is a problem. */
export function bindImpactKeys(templates: readonly string[], params: Readonly<Record<string, string | number | boolean>>): { keys: string[]; problems: string[] } {
  const problems: string[] = [];
  const keys = templates.map((t) =>
    t.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => {
      const v = params[name];
      if (v === undefined) {
        problems.push(`impact key template ${JSON.stringify(t)} needs params.${name}`);
        return '';
      }
      return String(v);
    }),
  );
  return { keys, problems };
}

export interface PacketContext {
  readonly caseId: string;
  readonly envelope: Pick<ExecutionEnvelope, 'scope'>;
  readonly fleet: Pick<FleetConfig, 'connectors'>;
  /** The task's current plan (null: none). A packet of a planned task must realise one of its steps. */
  readonly plan: { readonly revision: number; readonly stepIds: readonly string[] } | null;
  /** The resolved citations (evidence.ts); the packet carries them, so the digest binds them. */
  readonly evidence?: readonly EvidenceCitation[];
}

type PacketBuild = { readonly ok: true; readonly packet: EffectPacket } | { readonly ok: false; readonly problems: readonly string[] };

/**
 * The mechanical checks (operation registered and a write, in scope, parameters within bounds,
 * revert present and registered, target identity known) and the packet they allow. Params must
 * already be resolved.
 */
export function buildPacket(args: ProposalArgs, params: Readonly<Record<string, string | number | boolean>>, ctx: PacketContext): PacketBuild {
  const problems: string[] = [];
  const connector: FleetConnector | undefined = ctx.fleet.connectors?.[args.connector];
  const op: FleetOperation | undefined = connector?.operations[args.operation];
  if (!connector) return { ok: false, problems: [`connector ${args.connector} is not registered`] };
  if (!op) return { ok: false, problems: [`operation ${args.connector}/${args.operation} is not registered`] };
  if (op.access !== 'write') problems.push(`operation ${args.connector}/${args.operation} is a read, not a write`);
  if (!op.effectClass) problems.push(`operation ${args.connector}/${args.operation} declares no effect class, so no gate policy can apply to it`);
  const scope = writeInScope(ctx.envelope, args.connector, args.operation);
  if (!scope.allowed) problems.push(scope.why);
  if (!connector.target) problems.push(`connector ${args.connector} declares no target identity`);
  if (ctx.plan !== null && !ctx.plan.stepIds.includes(args.planStepId)) problems.push(`planStepId ${args.planStepId} is not a step of plan revision ${ctx.plan.revision}`);

  const bounds = op.params ?? {};
  for (const [name, value] of Object.entries(params)) {
    const bound = bounds[name];
    if (!bound) problems.push(`params.${name} is not a parameter of ${args.connector}/${args.operation}`);
    else problems.push(...boundProblems(name, value, bound));
  }
  for (const [name, bound] of Object.entries(bounds)) if (bound && bound.required !== false && params[name] === undefined) problems.push(`params.${name} is required`);

  const revert = args.revert;
  if (revert.kind === 'operation') {
    const inverse = revert.operation === undefined ? undefined : connector.operations[revert.operation];
    if (!inverse || inverse.access !== 'write') problems.push(`revert.operation must be a registered write of connector ${args.connector}`);
  }

  const bound = bindImpactKeys(op.impactKeys ?? [], params);
  problems.push(...bound.problems);
  if (problems.length > 0) return { ok: false, problems };

  const target = connector.target!;
  const impactKeys = [...new Set([...(bound.keys.length > 0 ? bound.keys : [`${args.connector}:${target.system}:${target.environment}`]), ...(args.impactKeys ?? [])])].sort();
  const packet: EffectPacket = {
    packetVersion: 1,
    caseId: ctx.caseId,
    planStepId: args.planStepId,
    planRevision: ctx.plan?.revision ?? 1,
    shapeVersion: op.shapeVersion ?? '1',
    // The template hash puts the exact request template under the digest every approval binds
    // to; the coordinator refuses the grant if the connector's template differs at dispatch.
    operation: { connector: args.connector, name: args.operation, ...templateHashOf(args.connector, connector, args.operation) },
    effectClass: op.effectClass!,
    target: { connector: args.connector, system: target.system, environment: target.environment },
    params: { ...params },
    expectedCounts: { ...(args.expectedCounts ?? {}) },
    preconditions: [...(args.preconditions ?? [])],
    assertions: [...(args.assertions ?? [])],
    revert,
    impactKeys,
    summary: args.summary,
    ...(ctx.evidence !== undefined && ctx.evidence.length > 0 ? { evidence: ctx.evidence.map((c) => ({ ...c })) } : {}),
  };
  const valid = validatePacket(packet);
  if (!valid.ok) return { ok: false, problems: valid.violations.map((v) => `packet${v.path} ${v.message}`) };
  return { ok: true, packet };
}

function templateHashOf(name: string, connector: FleetConnector, operation: string): { templateHash?: string } {
  const hash = declaredTemplateHash(name, connector, operation);
  return hash === undefined ? {} : { templateHash: hash };
}

/** What is already known about this mutation (from the journal and the gates). */
export interface PriorMutation {
  /** lookupMutation's answer. */
  readonly journal:
    | { readonly kind: 'none' }
    | { readonly kind: 'completed'; readonly callId: string; readonly receipt: Record<string, unknown> | null; readonly established: string }
    | { readonly kind: 'in_doubt'; readonly callId: string }
    | { readonly kind: 'failed'; readonly callId: string };
  /** Gates of the mutation key, newest first. */
  readonly gates: readonly { readonly id: string; readonly state: string; readonly packet_digest: string }[];
}

type ProposalStep =
  /** Applied before: the recorded receipt is the answer; nothing is asked or run. */
  | { readonly kind: 'receipt'; readonly callId: string; readonly receipt: Record<string, unknown> | null; readonly established: string }
  /** Its outcome is being established: wait for that, never a second attempt. */
  | { readonly kind: 'reconciling'; readonly callId: string }
  /** A gate for the same change is open (or approved and not yet settled): wait on that gate. */
  | { readonly kind: 'pending_gate'; readonly gateId: string; readonly packetDigest: string }
  /** Nothing live for this change: audit it and ask a new gate. */
  | { readonly kind: 'new' };

export function priorStep(prior: PriorMutation): ProposalStep {
  const j = prior.journal;
  if (j.kind === 'completed') return { kind: 'receipt', callId: j.callId, receipt: j.receipt, established: j.established };
  if (j.kind === 'in_doubt') return { kind: 'reconciling', callId: j.callId };
  // An approved gate whose effect has not been journalled yet is still on its way; a failed
  // attempt or a closed gate leaves the change to a new, separately approved packet.
  const live = prior.gates.find((g) => g.state === 'open' || (g.state === 'approved' && j.kind === 'none'));
  if (live) return { kind: 'pending_gate', gateId: live.id, packetDigest: live.packet_digest };
  return { kind: 'new' };
}
