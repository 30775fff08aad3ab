/**
 * The HTTP-agnostic ticket webhook handler behind `POST /v1/intake/<source>`.
 *
 * Order is the security property: size limit → signature over the raw bytes → JSON parse →
 * mapping → `ArrivalSink.open`. Every failure before the sink throws a typed error (errors.ts,
 * `webhookHttpStatus` → 401/404/413/422) and leaves nothing stored; an unverified body is never
 * even parsed.
 */
import type { Clock } from '@everdict/contracts';
import { EverdictError, sha256Hex, systemClock } from '@everdict/contracts';
import { oneLineTitle } from '../arrival.js';
import type { ArrivalSink, NormalisedArrival, WebhookReference } from '../arrival.js';
import { webhookOriginKey } from '../origin-key.js';
import { WebhookBodyTooLarge, WebhookInvalidPayload, WebhookUnknownSource } from './errors.js';
import { checkMappingConfig, mapPayload } from './mapping.js';
import type { WebhookMapping } from './mapping.js';
import { checkSignatureConfig, verifySignature } from './signature.js';
import type { HeaderBag, SignatureScheme } from './signature.js';

export const DEFAULT_WEBHOOK_MAX_BODY_BYTES = 1024 * 1024;

export interface WebhookSourceConfig {
  /** The path segment under /v1/intake/ and the `<source>` of origin keys. */
  name: string;
  /** Shared secrets; any one verifying is enough (rotation). At least 16 characters each. */
  secrets: string[];
  signature: SignatureScheme;
  mapping: WebhookMapping;
  /** Customer for arrivals whose mapping names none. Default: none. */
  customer?: string;
  /** Default 1048576 (1 MiB). */
  maxBodyBytes?: number;
}

export interface WebhookRequest {
  source: string;
  headers: HeaderBag;
  /** The body exactly as received; signatures are over these bytes. */
  rawBody: Uint8Array | string;
}

export type WebhookOutcome =
  /** 201 a case was opened, 200 the delivery was seen before (same case). */
  | { status: 201 | 200; caseId: string; created: boolean; originKey: string }
  /** Verified and acknowledged, but nothing to open (ping, other events or actions). */
  | { status: 202; ignored: string };

export interface WebhookHandler {
  handle(request: WebhookRequest): Promise<WebhookOutcome>;
}

/** Validates every source (throws `invalid_config` naming the field) and builds the handler. */
export function createWebhookHandler(deps: { sources: readonly WebhookSourceConfig[]; sink: ArrivalSink; clock?: Clock }): WebhookHandler {
  const sources = new Map<string, WebhookSourceConfig>();
  deps.sources.forEach((s, i) => {
    const path = `webhooks[${i}]`;
    if (!/^[a-z0-9][a-z0-9_-]{0,62}$/.test(s.name)) throw new EverdictError('invalid_config', `${path}.name must be a lowercase path segment`, { details: { path: `${path}.name` } });
    if (sources.has(s.name)) throw new EverdictError('invalid_config', `${path}.name ${s.name} is configured twice`, { details: { path: `${path}.name` } });
    checkSignatureConfig(s.signature, s.secrets, path);
    checkMappingConfig(s.mapping, `${path}.mapping`);
    if (s.maxBodyBytes !== undefined && !(s.maxBodyBytes > 0)) throw new EverdictError('invalid_config', `${path}.maxBodyBytes must be positive`, { details: { path: `${path}.maxBodyBytes` } });
    sources.set(s.name, s);
  });
  const clock = deps.clock ?? systemClock;

  return {
    async handle(request) {
      const source = sources.get(request.source);
      if (source === undefined) throw new WebhookUnknownSource(request.source);
      const body = typeof request.rawBody === 'string' ? Buffer.from(request.rawBody, 'utf8') : request.rawBody;
      const limit = source.maxBodyBytes ?? DEFAULT_WEBHOOK_MAX_BODY_BYTES;
      if (body.byteLength > limit) throw new WebhookBodyTooLarge(source.name, limit);
      const now = clock.now();
      verifySignature(source.name, source.signature, source.secrets, request.headers, body, now);

      let payload: unknown;
      try {
        payload = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
      } catch (_err) {
        throw new WebhookInvalidPayload(source.name, 'body', 'is not JSON');
      }
      if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) throw new WebhookInvalidPayload(source.name, 'body', 'must be a JSON object');

      const mapped = mapPayload(source.name, source.mapping, request.headers, payload);
      if (mapped.kind === 'ignored') return { status: 202, ignored: mapped.reason };

      const raw: WebhookReference = { kind: 'webhook', source: source.name, mapping: source.mapping.kind, deliveryId: mapped.deliveryId, bodySha256: sha256Hex(body) };
      if (mapped.event !== undefined) raw.event = mapped.event;
      if (mapped.url !== undefined) raw.url = mapped.url;
      const arrival: NormalisedArrival = {
        source: 'webhook',
        originKey: webhookOriginKey(source.name, mapped.deliveryId),
        title: oneLineTitle(mapped.title, '(untitled ticket)'),
        body: mapped.body.replace(/\r\n/g, '\n').trim(),
        receivedAt: now.toISOString(),
        attachments: [],
        raw,
      };
      const customer = mapped.customer ?? source.customer;
      if (customer !== undefined) arrival.customer = customer;
      const opened = await deps.sink.open(arrival);
      return { status: opened.created ? 201 : 200, caseId: opened.caseId, created: opened.created, originKey: arrival.originKey };
    },
  };
}
