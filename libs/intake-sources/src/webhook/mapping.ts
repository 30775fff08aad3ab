/**
 * Ticket payload → the fields of an arrival. Pure; runs only on VERIFIED bodies.
 *
 * - `generic`: JSON pointers (RFC 6901) name the id, title, body, customer and url. The id is
 *   the dedup identity within the source: point it at a ticket id for "one case per ticket", at
 *   a delivery id for "one case per delivery". It may come from a header instead.
 * - `github-issues`: GitHub's `issues` webhook (see README.md for the field table). Opens a
 *   case for the configured actions (default `opened`); `ping` and every other event or action
 *   are acknowledged and ignored.
 */
import { EverdictError } from '@everdict/contracts';
import { parsePointer, resolvePointer } from './json-pointer.js';
import { WebhookInvalidPayload } from './errors.js';
import { headerValue } from './signature.js';
import type { HeaderBag } from './signature.js';

type IdSource = { pointer: string } | { header: string };

export interface GenericMapping {
  kind: 'generic';
  id: IdSource;
  title: string;
  /** Default: no body (empty). */
  body?: string;
  customer?: string;
  url?: string;
  /** The ticket's event or state (e.g. `/action`, `/ticket/state`): the arrival's `event`; `closed` is the customer's closure. */
  event?: string;
}

export interface GithubIssuesMapping {
  kind: 'github-issues';
  /** Issue actions that open a case. Default `['opened']`. */
  actions?: string[];
}

export type WebhookMapping = GenericMapping | GithubIssuesMapping;

type MappedTicket =
  | { kind: 'ticket'; deliveryId: string; title: string; body: string; customer?: string; url?: string; event?: string }
  | { kind: 'ignored'; reason: string };

const GITHUB_EVENT_HEADER = 'x-github-event';
const GITHUB_DELIVERY_HEADER = 'x-github-delivery';
const MAX_ID_CHARS = 500;

/** Checks a mapping once, at configuration time (pointers parse, headers are names). */
export function checkMappingConfig(mapping: WebhookMapping, path: string): void {
  if (mapping.kind === 'github-issues') {
    if (mapping.actions !== undefined && (mapping.actions.length === 0 || mapping.actions.some((a) => typeof a !== 'string' || a.length === 0))) {
      throw new EverdictError('invalid_config', `${path}.actions must list at least one action name`, { details: { path: `${path}.actions` } });
    }
    return;
  }
  if ('pointer' in mapping.id) parsePointer(mapping.id.pointer, `${path}.id.pointer`);
  else if (!/^[A-Za-z0-9-]+$/.test(mapping.id.header)) throw new EverdictError('invalid_config', `${path}.id.header must be an HTTP header name`, { details: { path: `${path}.id.header` } });
  parsePointer(mapping.title, `${path}.title`);
  for (const field of ['body', 'customer', 'url', 'event'] as const) {
    const p = mapping[field];
    if (p !== undefined) parsePointer(p, `${path}.${field}`);
  }
}

function scalarText(value: unknown): string | undefined | null {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value === 'boolean') return String(value);
  return null; // present but not a scalar
}

function requiredText(source: string, payload: unknown, pointer: string): string {
  const v = scalarText(resolvePointer(payload, pointer));
  if (v === undefined) throw new WebhookInvalidPayload(source, pointer, 'is missing');
  if (v === null) throw new WebhookInvalidPayload(source, pointer, 'must be a string');
  if (v.trim().length === 0) throw new WebhookInvalidPayload(source, pointer, 'must not be empty');
  return v;
}

function optionalText(source: string, payload: unknown, pointer: string | undefined): string | undefined {
  if (pointer === undefined) return undefined;
  const v = scalarText(resolvePointer(payload, pointer));
  if (v === null) throw new WebhookInvalidPayload(source, pointer, 'must be a string');
  return v;
}

function checkId(source: string, where: string, id: string): string {
  const trimmed = id.trim();
  if (trimmed.length === 0) throw new WebhookInvalidPayload(source, where, 'must not be empty');
  if (trimmed.length > MAX_ID_CHARS) throw new WebhookInvalidPayload(source, where, `must be at most ${MAX_ID_CHARS} characters`);
  return trimmed;
}

function headerText(source: string, headers: HeaderBag, name: string): string {
  const h = headerValue(headers, name);
  if (h.kind === 'absent') throw new WebhookInvalidPayload(source, `header ${name}`, 'is missing');
  if (h.kind === 'ambiguous') throw new WebhookInvalidPayload(source, `header ${name}`, 'is sent more than once');
  return h.value;
}

function mapGeneric(source: string, m: GenericMapping, headers: HeaderBag, payload: unknown): MappedTicket {
  const deliveryId = 'pointer' in m.id ? checkId(source, m.id.pointer, requiredText(source, payload, m.id.pointer)) : checkId(source, `header ${m.id.header}`, headerText(source, headers, m.id.header.toLowerCase()));
  const ticket: MappedTicket = { kind: 'ticket', deliveryId, title: requiredText(source, payload, m.title), body: optionalText(source, payload, m.body) ?? '' };
  const customer = optionalText(source, payload, m.customer);
  if (customer !== undefined && customer.trim().length > 0) ticket.customer = customer.trim();
  const url = optionalText(source, payload, m.url);
  if (url !== undefined && url.length > 0) ticket.url = url;
  const event = optionalText(source, payload, m.event);
  if (event !== undefined && event.trim().length > 0) ticket.event = event.trim().slice(0, 100);
  return ticket;
}

function mapGithubIssues(source: string, m: GithubIssuesMapping, headers: HeaderBag, payload: unknown): MappedTicket {
  const event = headerText(source, headers, GITHUB_EVENT_HEADER);
  if (event === 'ping') return { kind: 'ignored', reason: 'ping' };
  if (event !== 'issues') return { kind: 'ignored', reason: `event ${event}` };
  const action = requiredText(source, payload, '/action');
  if (!(m.actions ?? ['opened']).includes(action)) return { kind: 'ignored', reason: `action ${action}` };
  const deliveryId = checkId(source, `header ${GITHUB_DELIVERY_HEADER}`, headerText(source, headers, GITHUB_DELIVERY_HEADER));
  const ticket: MappedTicket = {
    kind: 'ticket',
    deliveryId,
    title: requiredText(source, payload, '/issue/title'),
    // GitHub sends `"body": null` for an issue opened without a description.
    body: optionalText(source, payload, '/issue/body') ?? '',
    event: `issues.${action}`,
  };
  const url = optionalText(source, payload, '/issue/html_url');
  if (url !== undefined && url.length > 0) ticket.url = url;
  return ticket;
}

/** Maps a verified, parsed payload. Throws `WebhookInvalidPayload` naming the field. */
export function mapPayload(source: string, mapping: WebhookMapping, headers: HeaderBag, payload: unknown): MappedTicket {
  return mapping.kind === 'generic' ? mapGeneric(source, mapping, headers, payload) : mapGithubIssues(source, mapping, headers, payload);
}
