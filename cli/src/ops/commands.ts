/**
 * Operator commands (DESIGN §7): `cases`, `case <id>`, `gates`, `decide`, `answer`, `cancel`,
 * `resume`, `top-up`, `fleet`, `verify`, `ledger`, `gate`, `revoke` (ledgerOps.ts). Each talks to the HTTP API as the principal of EVERDICT_TOKEN — the server enforces
 * roles and ownership, the CLI holds no authority of its own. Human-readable by default,
 * one JSON document with `--json`.
 */
import { parseArgs } from 'node:util';
import { UsageError } from '../args.js';
import { emit } from '../output.js';
import { apiTarget, request } from './client.js';
import type { ApiTarget } from './client.js';
import { caseText, casesText, fleetStopsText, fleetText, gatesText } from './format.js';
import { gateCommand, ledgerCommand, pollInterval, revokeCommand, verifyCommand } from './ledgerOps.js';
import { outcomeCommand } from './outcomeOps.js';
import { takeoverCommand } from './sessionOps.js';
import type { CaseDetailView, CaseSummaryView, FleetStopView, FleetView, GateView } from './format.js';

const OPS_COMMANDS = ['cases', 'case', 'gates', 'decide', 'answer', 'cancel', 'resume', 'top-up', 'fleet', 'verify', 'ledger', 'gate', 'revoke', 'outcome', 'takeover'] as const;
type OpsCommand = (typeof OPS_COMMANDS)[number];

export const OPS_HELP = `  cases [--state S] [--limit N] [--before ID]
                                      cases the token's principal may see, newest first; S is one of
                                      opened running parked at_gate held resolved closed cancelled
                                      (a parked case shows its reason class, every case its age)
  case <caseId>                       state, task tree with costs (tokens, cost, active/waiting minutes), plan,
                                      gates, open questions; the case total sums every task
  verify <caseId>                     recompute the case's ledger chain; prints the head (seq + hash) — keep it:
                                      a later head at a lower seq or another hash means a removed tail. Exit 1 if broken
  ledger <caseId> [--follow] [--interval-ms N]
                                      the case's ledger records, one a line; --follow keeps printing new ones
  gate <gateId>                       one gate with its whole packet
  revoke <gateId> [--reason R]        revoke a gate's grant (operator, or a holder of one of its roles)
  outcome <callId> --applied|--not-applied|--partly-applied --evidence TEXT [--proof PAPER]
                                      record what landed for an effect call in doubt (operator, or a role that
                                      decided its gate); only applied / not applied release its impact keys
  takeover <caseId> --reason R        take over the case's session (role operator); the previous controller is
                                      notified and the handover ledgered. Cancel, resume, top-up, answer and outcome
                                      on a case are for its controller (the first principal to act) only
  gates [--state open|approved|…]     gates the principal may decide
  decide <gateId> --decision D --verdict approve|reject --digest sha256:… [--reason R]
  answer <questionId> <text…>         answer a question that parked a task
  cancel <caseId> [--mode hard|soft] [--reason R]
  resume <caseId> [--reason R]        lift a soft stop; the parked root task goes on (role operator)
  top-up <caseId> [--task ID] [--turns N] [--tool-calls N] [--tokens N] [--minutes N] [--reason R]
                                      raise a task's budget (default the root task); a budget park wakes
  fleet                               task and parked counts, outbox lag, queue depths and consumers, fleet stops
  fleet stop --hard|--soft --reason R stop the whole fleet (role operator): --hard refuses every new effect
                                      at dispatch (reads and reconciliation go on); --soft admits no new case
                                      and parks running tasks at their next checkpoint
  fleet resume [--hard|--soft] [--reason R]
                                      lift the fleet stop (default both kinds); the parked tasks wake
  (operator commands use EVERDICT_URL, EVERDICT_GATE_URL and EVERDICT_TOKEN)`;

export function isOpsCommand(word: string | undefined): word is OpsCommand {
  return (OPS_COMMANDS as readonly string[]).includes(word ?? '');
}

interface OpsArgs {
  positionals: string[];
  json: boolean;
  state?: string;
  limit?: string;
  before?: string;
  decision?: string;
  verdict?: string;
  digest?: string;
  reason?: string;
  mode?: string;
  task?: string;
  turns?: string;
  'tool-calls'?: string;
  tokens?: string;
  minutes?: string;
  hard?: boolean;
  soft?: boolean;
  follow?: boolean;
  'interval-ms'?: string;
  applied?: boolean;
  'not-applied'?: boolean;
  'partly-applied'?: boolean;
  evidence?: string;
  proof?: string;
}

function parseOps(argv: readonly string[]): OpsArgs {
  try {
    const { values, positionals } = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        json: { type: 'boolean', default: false },
        state: { type: 'string' },
        limit: { type: 'string' },
        before: { type: 'string' },
        decision: { type: 'string' },
        verdict: { type: 'string' },
        digest: { type: 'string' },
        reason: { type: 'string' },
        mode: { type: 'string' },
        task: { type: 'string' },
        turns: { type: 'string' },
        'tool-calls': { type: 'string' },
        tokens: { type: 'string' },
        minutes: { type: 'string' },
        hard: { type: 'boolean' },
        soft: { type: 'boolean' },
        follow: { type: 'boolean' },
        'interval-ms': { type: 'string' },
        applied: { type: 'boolean' },
        'not-applied': { type: 'boolean' },
        'partly-applied': { type: 'boolean' },
        evidence: { type: 'string' },
        proof: { type: 'string' },
      },
    });
    const out: OpsArgs = { positionals, json: values.json ?? false };
    for (const k of ['state', 'limit', 'before', 'decision', 'verdict', 'digest', 'reason', 'mode', 'task', 'turns', 'tool-calls', 'tokens', 'minutes'] as const) if (values[k] !== undefined) out[k] = values[k];
    if (values.hard) out.hard = true;
    if (values.soft) out.soft = true;
    if (values.follow) out.follow = true;
    if (values['interval-ms'] !== undefined) out['interval-ms'] = values['interval-ms'];
    for (const k of ['applied', 'not-applied', 'partly-applied'] as const) if (values[k]) out[k] = true;
    if (values.evidence !== undefined) out.evidence = values.evidence;
    if (values.proof !== undefined) out.proof = values.proof;
    return out;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function one(a: OpsArgs, what: string): string {
  const v = a.positionals[0];
  if (!v || a.positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return encodeURIComponent(v);
}

/** The limits `top-up` raises, from --turns/--tool-calls/--tokens/--minutes (at least one). */
function topUpAmounts(a: Pick<OpsArgs, 'turns' | 'tool-calls' | 'tokens' | 'minutes'>): Record<string, number> {
  const out: Record<string, number> = {};
  const flags = [
    ['turns', 'maxTurns'],
    ['tool-calls', 'maxToolCalls'],
    ['tokens', 'maxTokens'],
    ['minutes', 'maxActiveMinutes'],
  ] as const;
  for (const [flag, key] of flags) {
    const v = a[flag];
    if (v === undefined) continue;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${flag} must be a positive number`);
    out[key] = n;
  }
  if (Object.keys(out).length === 0) throw new UsageError('top-up needs at least one of --turns, --tool-calls, --tokens, --minutes');
  return out;
}

/** Runs `command` with the rest of argv; resolves to the exit code. */
export async function runOps(command: OpsCommand, argv: readonly string[], env: Readonly<Record<string, string | undefined>> = process.env): Promise<number> {
  const a = parseOps(argv);
  const t: ApiTarget = apiTarget(env);
  switch (command) {
    case 'cases': {
      const q = new URLSearchParams();
      if (a.state) q.set('state', a.state);
      if (a.limit) q.set('limit', a.limit);
      if (a.before) q.set('before', a.before);
      const r = await request<{ cases: CaseSummaryView[]; next: string | null }>(t.url, t.token, 'GET', `/v1/cases${q.size ? `?${q}` : ''}`);
      emit(a.json, r, () => casesText(r.cases) + (r.next ? `\n(more: --before ${r.next})` : ''));
      return 0;
    }
    case 'case': {
      const r = await request<CaseDetailView>(t.url, t.token, 'GET', `/v1/cases/${one(a, 'case id')}`);
      emit(a.json, r, () => caseText(r));
      return 0;
    }
    case 'gates': {
      const r = await request<{ gates: GateView[] }>(t.gateUrl, t.token, 'GET', `/v1/gates?state=${encodeURIComponent(a.state ?? 'open')}`);
      emit(a.json, r, () => gatesText(r.gates));
      return 0;
    }
    case 'decide': {
      const gate = one(a, 'gate id');
      if (!a.decision) throw new UsageError('--decision is required');
      if (a.verdict !== 'approve' && a.verdict !== 'reject') throw new UsageError('--verdict must be approve or reject');
      if (!a.digest) throw new UsageError('--digest is required (the packet digest you reviewed)');
      const r = await request<Record<string, unknown>>(t.gateUrl, t.token, 'POST', `/v1/gates/${gate}/decisions`, { decision: a.decision, verdict: a.verdict, digest: a.digest, ...(a.reason ? { reason: a.reason } : {}) });
      emit(a.json, r, () => `recorded ${a.verdict} for ${a.decision} on gate ${decodeURIComponent(gate)}${typeof r['state'] === 'string' ? `; gate is ${r['state']}` : ''}`);
      return 0;
    }
    case 'answer': {
      const [question, ...words] = a.positionals;
      if (!question || words.length === 0) throw new UsageError('usage: everdict answer <questionId> <text…>');
      const r = await request<{ questionId: string; caseId: string }>(t.url, t.token, 'POST', `/v1/questions/${encodeURIComponent(question)}/answer`, { answer: words.join(' ') });
      emit(a.json, r, () => `answer sent for question ${r.questionId} (case ${r.caseId})`);
      return 0;
    }
    case 'cancel': {
      const id = one(a, 'case id');
      const mode = a.mode ?? 'hard';
      if (mode !== 'hard' && mode !== 'soft') throw new UsageError('--mode must be hard or soft');
      const r = await request<{ caseId: string; stopMode: string }>(t.url, t.token, 'POST', `/v1/cases/${id}/cancel`, { mode, ...(a.reason ? { reason: a.reason } : {}) });
      emit(a.json, r, () => `cancel (${mode}) requested for case ${r.caseId}; stop mode ${r.stopMode}`);
      return 0;
    }
    case 'resume': {
      const id = one(a, 'case id');
      const r = await request<{ caseId: string; rootTaskId: string | null }>(t.url, t.token, 'POST', `/v1/cases/${id}/resume`, a.reason ? { reason: a.reason } : {});
      emit(a.json, r, () => `resume requested for case ${r.caseId}${r.rootTaskId ? ` (root task ${r.rootTaskId})` : ''}; soft stop lifted`);
      return 0;
    }
    case 'top-up': {
      const id = one(a, 'case id');
      const budget = topUpAmounts(a);
      const r = await request<{ caseId: string; taskId: string }>(t.url, t.token, 'POST', `/v1/cases/${id}/top-up`, { budget, ...(a.task ? { taskId: a.task } : {}), ...(a.reason ? { reason: a.reason } : {}) });
      emit(a.json, r, () => `budget of task ${r.taskId} (case ${r.caseId}) topped up by ${Object.entries(budget).map(([k, v]) => `${k} +${v}`).join(', ')}`);
      return 0;
    }
    case 'fleet':
      return fleetCommand(t, a);
    case 'verify':
      return verifyCommand(t, one(a, 'case id'), a.json);
    case 'ledger': {
      const id = one(a, 'case id');
      const pollMs = pollInterval(a['interval-ms']);
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        return await ledgerCommand(t, id, { json: a.json, follow: a.follow ?? false, pollMs, signal: stop.signal });
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    }
    case 'gate':
      return gateCommand(t, one(a, 'gate id'), a.json);
    case 'revoke':
      return revokeCommand(t, one(a, 'gate id'), a.reason, a.json);
    case 'takeover':
      return takeoverCommand(t, one(a, 'case id'), a.reason, a.json);
    case 'outcome':
      return outcomeCommand(t, one(a, 'effect call id'), a, a.json);
  }
}

/** The stop kind from --hard / --soft: exactly one when `required`, at most one otherwise. */
function stopKind(a: Pick<OpsArgs, 'hard' | 'soft'>, required: boolean): 'hard' | 'soft' | undefined {
  if (a.hard && a.soft) throw new UsageError('give --hard or --soft, not both');
  if (a.hard) return 'hard';
  if (a.soft) return 'soft';
  if (required) throw new UsageError('fleet stop needs --hard or --soft');
  return undefined;
}

async function fleetCommand(t: ApiTarget, a: OpsArgs): Promise<number> {
  const [sub, ...extra] = a.positionals;
  if (extra.length > 0 || (sub !== undefined && sub !== 'stop' && sub !== 'resume')) throw new UsageError('usage: everdict fleet [stop --hard|--soft --reason R | resume [--hard|--soft] [--reason R]]');
  if (sub === undefined) {
    const r = await request<FleetView>(t.url, t.token, 'GET', '/v1/fleet');
    emit(a.json, r, () => fleetText(r));
    return 0;
  }
  if (sub === 'stop') {
    const kind = stopKind(a, true)!;
    if (!a.reason) throw new UsageError('fleet stop needs --reason (it is recorded with who and when)');
    const r = await request<{ stops: FleetStopView[] }>(t.url, t.token, 'POST', '/v1/fleet/stop', { kind, reason: a.reason });
    emit(a.json, r, () => `fleet ${kind} stop in force\n${fleetStopsText(r.stops)}`);
    return 0;
  }
  const kind = stopKind(a, false);
  const r = await request<{ lifted: string[]; resumedTasks: number; releasedDispatches: number; stops: FleetStopView[] }>(t.url, t.token, 'POST', '/v1/fleet/resume', { ...(kind ? { kind } : {}), ...(a.reason ? { reason: a.reason } : {}) });
  emit(a.json, r, () => `${r.lifted.length ? `lifted: ${r.lifted.join(', ')}` : 'no fleet stop was in force'}; ${r.resumedTasks} parked task(s) resumed, ${r.releasedDispatches} held dispatch(es) released\n${fleetStopsText(r.stops)}`);
  return 0;
}

