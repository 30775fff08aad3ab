/**
 * The HTTP-service connector: registered operations from config, an `Idempotency-Key` header on
 * every mutation, and WhatLanded through the service's receipt lookup for that key.
 */
import type { EffectPacket, EffectParams } from '@everdict/contracts';
import { packetDigest } from '@everdict/contracts';
import { admitIdempotencyKey, admitPacket, admitRead, admitTarget } from '../admission.js';
import { preflightChecks } from '../checks.js';
import type {
  CallIdentity,
  Connector,
  ConnectorCapability,
  ConnectorContext,
  DryRunResult,
  LandedReport,
  OperationCapability,
  PreflightResult,
  ReadOperationCapability,
  ReadResult,
} from '../connector.js';
import { ConnectorRefused, ConnectorUnavailable } from '../errors.js';
import type { PostStateSpec } from '../postState.js';
import { bindPostState, postStateHolds } from '../postState.js';
import { HTTP_CONNECTOR_KIND, httpOperationHash } from '../template-hash.js';
import type { Classified } from './classify.js';
import { classifyMutation, classifyReceiptLookup, parseBody } from './classify.js';
import type { HttpOperationConfig, HttpServiceConfig } from './config.js';
import { renderReceiptLookup, renderRequest, reviewHttpConfig } from './render.js';
import type { HttpAttempt, HttpExchange } from './transport.js';
import { sendHttp } from './transport.js';

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;

interface HttpServiceConnectorOptions {
  /** The exchange function; defaults to a real request over node:http(s). */
  readonly send?: (exchange: HttpExchange) => Promise<HttpAttempt>;
}

export class HttpServiceConnector implements Connector {
  readonly name: string;
  private readonly capability: ConnectorCapability;
  private readonly operations: ReadonlyMap<string, HttpOperationConfig>;
  private readonly send: (exchange: HttpExchange) => Promise<HttpAttempt>;

  constructor(private readonly config: HttpServiceConfig, opts: HttpServiceConnectorOptions = {}) {
    reviewHttpConfig(config);
    this.name = config.name;
    this.operations = new Map(config.operations.map((op) => [op.name, op]));
    this.send = opts.send ?? sendHttp;
    this.capability = describeHttp(config);
  }

  describe(): ConnectorCapability {
    return this.capability;
  }

  async read(operation: string, params: EffectParams, ctx: ConnectorContext): Promise<ReadResult> {
    admitRead(this.capability, operation, params);
    const op = this.operation(operation);
    const attempt = await this.exchange(renderRequest(this.config.baseUrl, op, params), {}, ctx);
    // A 4xx is an answer about the state (e.g. 404: the account does not exist); checks may
    // assert it. Anything that is not an answer cannot stand in for state.
    if (attempt.kind !== 'response' || attempt.status >= 500 || attempt.status < 200 || !attempt.complete) {
      throw new ConnectorUnavailable(this.name, operation, attempt.kind === 'response' ? `HTTP ${attempt.status}` : attempt.cause, undefined, attempt.kind === 'response');
    }
    return { operation, value: { status: attempt.status, body: parseBody(attempt.body) }, observedAt: ctx.clock.now().toISOString() };
  }

  preflight(packet: EffectPacket, ctx: ConnectorContext): Promise<PreflightResult> {
    return preflightChecks(this.capability, (op, params, c) => this.read(op, params, c), packet, ctx);
  }

  async dryRun(packet: EffectPacket): Promise<DryRunResult> {
    admitPacket(this.capability, packet);
    const req = renderRequest(this.config.baseUrl, this.operation(packet.operation.name), packet.params);
    return { kind: 'render', rendered: { method: req.method, url: req.url.toString(), body: req.body ?? null } };
  }

  async execute(packet: EffectPacket, call: CallIdentity, ctx: ConnectorContext): Promise<LandedReport> {
    admitPacket(this.capability, packet);
    admitIdempotencyKey(this.capability, call.idempotencyKey);
    const req = renderRequest(this.config.baseUrl, this.operation(packet.operation.name), packet.params);
    const attempt = await this.exchange(
      req,
      {
        'idempotency-key': call.idempotencyKey,
        'everdict-call-id': call.callId,
        'everdict-packet-digest': packetDigest(packet),
        ...(req.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ctx,
    );
    return this.report(classifyMutation(attempt, call.idempotencyKey), ctx);
  }

  /**
   * The receipt lookup for the key, when the target has one; when it is not conclusive (or
   * absent) and the operation declares a post-state, that read decides: an exact match is
   * `applied`, anything else leaves the receipt's answer (or `unknown`) standing.
   */
  async whatLanded(packet: EffectPacket, call: CallIdentity, ctx: ConnectorContext): Promise<LandedReport> {
    admitTarget(this.capability, packet);
    admitIdempotencyKey(this.capability, call.idempotencyKey);
    let receipt: LandedReport | undefined;
    if (this.config.receipts !== undefined) {
      const url = renderReceiptLookup(this.config.baseUrl, this.config.receipts.path, call.idempotencyKey);
      const attempt = await this.exchange({ method: 'GET', url }, { 'idempotency-key': call.idempotencyKey }, ctx);
      receipt = this.report(classifyReceiptLookup(attempt, call.idempotencyKey, this.config.receipts.conclusive), ctx);
      if (receipt.outcome !== 'unknown') return receipt;
    }
    const post = this.operations.get(packet.operation.name)?.postState;
    if (post === undefined) {
      return receipt ?? this.report({ outcome: 'unknown', reason: 'no_receipts_endpoint', established: 'the target has no receipts endpoint and the operation declares no post-state read: an operator must record the outcome' }, ctx);
    }
    return (await this.postStateReport(post, packet, ctx)) ?? receipt ?? this.report({ outcome: 'unknown', reason: 'post_state_differs', established: `the post-state read ${post.read} does not show the expected state at ${post.pointer}; that proves nothing either way` }, ctx);
  }

  /** `applied` when the declared post-state holds exactly; undefined when it does not or cannot be read. */
  private async postStateReport(post: PostStateSpec, packet: EffectPacket, ctx: ConnectorContext): Promise<LandedReport | undefined> {
    const bound = bindPostState(post, packet.params);
    let result: ReadResult;
    try {
      result = await this.read(post.read, bound.params, ctx);
    } catch (err) {
      if (err instanceof ConnectorUnavailable || err instanceof ConnectorRefused) return undefined;
      throw err;
    }
    const judged = postStateHolds(result.value, post.pointer, bound.equals);
    if (!judged.holds) return undefined;
    return this.report(
      { outcome: 'applied', established: `the post-state read ${post.read} shows exactly the expected state at ${post.pointer}`, receipt: { postState: { read: post.read, pointer: post.pointer, observed: judged.observed } } },
      ctx,
    );
  }

  async close(): Promise<void> {
    // Every exchange uses its own connection; nothing is pooled.
  }

  private operation(name: string): HttpOperationConfig {
    const op = this.operations.get(name);
    if (op === undefined) throw new ConnectorRefused(this.name, 'unregistered_operation', [{ path: '/operation/name', message: 'is not a registered operation' }]);
    return op;
  }

  private exchange(req: { method: string; url: URL; body?: string }, headers: Record<string, string>, ctx: ConnectorContext): Promise<HttpAttempt> {
    return this.send({
      method: req.method,
      url: req.url,
      ...(req.body === undefined ? {} : { body: req.body }),
      headers: { accept: 'application/json', ...this.config.headers, ...headers },
      timeoutMs: this.config.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      maxResponseBytes: this.config.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
      ...(ctx.signal === undefined ? {} : { signal: ctx.signal }),
    });
  }

  private report(classified: Classified, ctx: ConnectorContext): LandedReport {
    return { ...classified, observedAt: ctx.clock.now().toISOString() };
  }
}

/** The capability description of an HTTP-service configuration. */
function describeHttp(config: HttpServiceConfig): ConnectorCapability {
  const hashOf = httpOperationHash;
  const operations: OperationCapability[] = config.operations
    .filter((op) => op.kind === 'mutate')
    .map((op) => ({
      name: op.name,
      effectClass: op.effectClass ?? '',
      params: op.params,
      dryRun: 'render',
      idempotent: op.idempotent ?? false,
      templateHash: hashOf(op),
      // An HTTP answer carries no count this connector could verify before the effect lands.
      expectedCounts: {},
    }));
  const readOperations: ReadOperationCapability[] = config.operations
    .filter((op) => op.kind === 'read')
    // A read is a GET (review refuses anything else), safe to send alongside other reads.
    .map((op) => ({ name: op.name, params: op.params, templateHash: hashOf(op), independent: true }));
  return {
    connector: config.name,
    kind: HTTP_CONNECTOR_KIND,
    target: config.target,
    operations,
    readOperations,
    whatLandedConclusive: config.receipts?.conclusive ?? false,
    whatLandedMethod:
      config.receipts === undefined
        ? 'no receipts endpoint: a declared post-state read proves applied; otherwise an operator records the outcome'
        : config.receipts.conclusive
          ? 'receipt lookup by idempotency key; the service declares a missing receipt conclusive'
          : 'receipt lookup by idempotency key; a missing receipt is not proof of absence',
  };
}
