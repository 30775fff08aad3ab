/**
 * Consent for egress reads (K3, seed 004 §5): the turn-worker's permission hook, and the consent
 * gate a turn parks on.
 *
 * The kernel asks the hook only where `permissionRequired` says so: every write, and a read whose
 * declared effects require consent (external egress — e.g. an undeclared read of an http MCP
 * server). For such a read the case type's `consent.rules` decide, most specific first: the tool
 * name the model sees, then the `connector/operation` a connector read calls, then the connector
 * or MCP server name. No rule: refused (fail closed), naming the rule that is missing.
 *   allow → the read runs;  deny → `consent_denied`;
 *   ask   → the consent gate of THIS call (task + call id), bound to the digest of the exact call
 *           {tool, canonical arguments, destination}:
 *             none yet  → the hook answers `ask`: the call's intent stays open and the turn parks
 *                         `consent`; the gate row is written in the park's unit of work (under the
 *                         task's fence, `placeConsents`);
 *             open      → `ask` again (the task parks on the same gate);
 *             approved  → allowed once: the consent is consumed by this call id and admits no other;
 *             rejected, expired or revoked, or a digest that is not this call's → `consent_denied`.
 * A rule never makes a write callable: the only write an agent has is `writes__propose` (its
 * authority is the write gate's grant); every other write is refused. `isReadOnly` is the
 * handler's real access kind, never derived from a rule.
 */
import { EverdictError, newId, payloadHash } from '@everdict/contracts';
import type { FleetCaseType, FleetConfig, FleetConsent, ToolDescriptor } from '@everdict/contracts';
import type { PermissionDecision, PermissionHook, PermissionRequest, ToolRegistry } from '@everdict/agent-runtime';
import { bridgedToolName } from '@everdict/mcp';
import { caseTypeOf, consentOfCall, consumeConsent, openConsentGate } from '@everdict/store';
import type { Queryable, UnitOfWork } from '@everdict/store';
import type { Transition } from './decisions.js';
import type { Placer } from './placement.js';
import { PROPOSE_TOOL } from './proposal.js';

export type ConsentRuleValue = 'allow' | 'deny' | 'ask';

/** Who decides an `ask` when the case type names no role, and how long its gate stays open. */
export const DEFAULT_CONSENT_ROLE = 'approver';
export const DEFAULT_CONSENT_TTL_MS = 24 * 60 * 60_000;
/** The one decision a consent gate needs. */
export const CONSENT_DECISION = 'consent';

/** What a consent-requiring call is, for rule resolution and for the human who decides it. */
export interface ConsentSubject {
  readonly tool: string;
  /** `connector/operation` of a connector read. */
  readonly operation?: string;
  /** The connector or MCP server the tool reaches. */
  readonly source?: string;
  /** Where the call's data goes: shown to the decider and bound into the digest. */
  readonly destination: Readonly<Record<string, unknown>>;
}

/** The rule that decides `subject`, most specific first; null when no rule names it. Pure. */
export function resolveConsentRule(rules: FleetConsent['rules'] | undefined, subject: Pick<ConsentSubject, 'tool' | 'operation' | 'source'>): { readonly key: string; readonly rule: ConsentRuleValue } | null {
  if (rules === undefined) return null;
  for (const key of [subject.tool, subject.operation, subject.source]) {
    if (key === undefined || !Object.hasOwn(rules, key)) continue;
    const rule = rules[key];
    if (rule !== undefined) return { key, rule };
  }
  return null;
}

/** The digest a consent is bound to: the exact call, canonically. Pure. */
export function consentDigest(call: { readonly tool: string; readonly arguments: Readonly<Record<string, unknown>>; readonly destination: Readonly<Record<string, unknown>> }): string {
  return payloadHash({ tool: call.tool, arguments: call.arguments, destination: call.destination });
}

/**
 * The connector or MCP server a tool reaches and where its data goes, from the fleet config and
 * the tool's descriptor. Pure. A tool the config cannot place is its own destination.
 */
export function consentSubjectOf(config: Pick<FleetConfig, 'profiles' | 'mcpServers' | 'connectors'>, profileName: string, d: Pick<ToolDescriptor, 'name' | 'connectorRead'>): ConsentSubject {
  if (d.connectorRead !== undefined) {
    const { connector, operation } = d.connectorRead;
    const target = config.connectors?.[connector]?.target;
    return { tool: d.name, operation: `${connector}/${operation}`, source: connector, destination: { kind: 'connector', connector, operation, ...(target ? { target: { ...target } } : {}) } };
  }
  for (const use of config.profiles[profileName]?.mcp ?? []) {
    if (!Object.keys(use.tools).some((t) => bridgedToolName(use.server, t) === d.name)) continue;
    const server = config.mcpServers?.[use.server];
    const where = server === undefined ? {} : server.transport === 'http' ? { url: server.url } : { command: server.command };
    return { tool: d.name, source: use.server, destination: { kind: 'mcp', server: use.server, ...where } };
  }
  return { tool: d.name, destination: { kind: 'tool', tool: d.name } };
}

/** A consent gate the turn parks on: opened by `placeConsents` unless `existing`. */
export interface ConsentAsk {
  readonly gateId: string;
  readonly existing: boolean;
  readonly callId: string;
  readonly tool: string;
  readonly arguments: Readonly<Record<string, unknown>>;
  readonly destination: Readonly<Record<string, unknown>>;
  readonly digest: string;
  readonly rule: string;
  readonly role: string;
  readonly ttlMs: number;
}

interface HookDeps {
  readonly db: Queryable;
  readonly fleet: () => FleetConfig;
  readonly caseId: string;
  readonly profileName: string;
  readonly registry: ToolRegistry;
  /** The asks of this turn, in the order the hook made them (the task parks on the first). */
  readonly asks: ConsentAsk[];
}

const deny = (reason: string, refusal: 'permission_denied' | 'consent_denied'): PermissionDecision => ({ decision: 'deny', reason, refusal });

/** The turn's permission hook (see the module comment). */
export function permissionHook(deps: HookDeps): PermissionHook {
  let caseType: Promise<string | undefined> | null = null;
  return {
    async request(req) {
      if (req.reason === 'write') return req.tool === PROPOSE_TOOL ? { decision: 'allow' } : deny('writes go through writes__propose and a gate', 'permission_denied');
      caseType ??= caseTypeOf(deps.db, deps.caseId);
      const name = (await caseType) ?? '';
      const config = deps.fleet();
      const ct: FleetCaseType | undefined = config.caseTypes[name];
      const descriptor = deps.registry.descriptor(req.tool);
      const subject = consentSubjectOf(config, deps.profileName, descriptor ?? { name: req.tool });
      const resolved = resolveConsentRule(ct?.consent?.rules, subject);
      if (resolved === null) {
        return deny(`no consent rule for this read: add caseTypes.${name}.consent.rules.${subject.tool} (allow, deny or ask)${subject.source ? ` or a rule for ${subject.source}` : ''}`, 'permission_denied');
      }
      if (resolved.rule === 'allow') return { decision: 'allow' };
      if (resolved.rule === 'deny') return deny(`caseTypes.${name}.consent.rules.${resolved.key} is deny`, 'consent_denied');
      return askFor(deps, req, subject, resolved.key, ct?.consent);
    },
  };
}

async function askFor(deps: HookDeps, req: PermissionRequest, subject: ConsentSubject, rule: string, consent: FleetConsent | undefined): Promise<PermissionDecision> {
  const digest = consentDigest({ tool: req.tool, arguments: req.arguments, destination: subject.destination });
  const role = consent?.role ?? DEFAULT_CONSENT_ROLE;
  const ttlMs = consent?.ttlMs ?? DEFAULT_CONSENT_TTL_MS;
  const ask = (gateId: string, existing: boolean): PermissionDecision => {
    deps.asks.push({ gateId, existing, callId: req.callId, tool: req.tool, arguments: req.arguments, destination: subject.destination, digest, rule, role, ttlMs });
    return { decision: 'ask' };
  };
  const row = await consentOfCall(deps.db, req.taskId, req.callId);
  if (row === undefined) return ask(newId(), false);
  if (row.digest !== digest) return deny('the consent was given for another call (tool, arguments or destination differ)', 'consent_denied');
  switch (row.state) {
    case 'open':
      return ask(row.gate_id, true);
    case 'approved':
      if (!(await consumeConsent(deps.db, row.gate_id, req.callId))) return deny('the consent is no longer approved', 'consent_denied');
      return { decision: 'allow' };
    default:
      return deny(`consent ${row.state}${row.reason ? `: ${row.reason}` : ''}`.slice(0, 500), 'consent_denied');
  }
}

/** A `consent` park waits on the gate of the first ask; any other transition is unchanged. Pure. */
export function waitOnConsent(t: Transition, asks: readonly ConsentAsk[]): Transition {
  if (t.kind !== 'park' || t.reason !== 'consent') return t;
  const first = asks[0];
  if (first === undefined) throw new EverdictError('consent_park_without_gate', 'the run suspended for consent, but no call asked for it', { details: { field: 'asks' } });
  return { ...t, detail: { ...t.detail, gateId: first.gateId, callId: first.callId, tool: first.tool } };
}

/**
 * The consent gates of a turn that parks on them, in its unit of work under the task's fence:
 * each new gate with its consents row and a `consent_requested` ledger record (no arguments in
 * the ledger: the digest binds them, the gate shows them). Returns the transition to commit:
 * the park, or a release when the gate the task would wait on was decided meanwhile (its decider
 * found no parked task to wake; the next activation asks the hook again and finds the answer).
 */
export async function placeConsents(uow: UnitOfWork, at: Placer, asks: readonly ConsentAsk[], transition: Transition): Promise<Transition> {
  const { task } = at;
  for (const a of asks) {
    if (a.existing) continue;
    const opened = await openConsentGate(uow, {
      gateId: a.gateId,
      caseId: task.case_id,
      taskId: task.id,
      callId: a.callId,
      digest: a.digest,
      tool: a.tool,
      arguments: a.arguments,
      destination: a.destination,
      rule: a.rule,
      decisions: [{ decision: CONSENT_DECISION, role: a.role }],
      ttlMs: a.ttlMs,
      summary: `consent for ${a.tool}`,
    });
    if (!opened) continue;
    await uow.appendLedger(task.case_id, { kind: 'consent_requested', body: { gateId: a.gateId, taskId: task.id, callId: a.callId, tool: a.tool, digest: a.digest, destination: a.destination, rule: a.rule, role: a.role } });
  }
  if (transition.kind !== 'park' || transition.reason !== 'consent') return transition;
  const waitedOn = (transition.detail as { gateId?: string }).gateId;
  const state = (await uow.query<{ state: string }>({ name: 'consent_gate_state_locked', text: 'SELECT state FROM gates WHERE id = $1::uuid FOR UPDATE', values: [waitedOn] })).rows[0]?.state;
  return state === 'open' ? transition : { kind: 'release' };
}
