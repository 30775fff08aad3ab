import { describe, expect, it } from 'vitest';
import { isEverdictError, manualClock, sha256Hex } from '@everdict/contracts';
import type { SignatureScheme, WebhookSourceConfig } from '@everdict/intake-sources';
import {
  InMemoryArrivalSink,
  WebhookInvalidPayload,
  WebhookUnauthenticated,
  createWebhookHandler,
  mapPayload,
  parsePointer,
  resolvePointer,
  signBody,
  verifySignature,
  webhookHttpStatus,
} from '@everdict/intake-sources';

const SECRET = 'it-is-a-long-shared-secret';
const OTHER = 'another-long-shared-secret';
const NOW = new Date('2026-05-04T10:00:00.000Z');
const NOW_S = NOW.getTime() / 1000;

const github: SignatureScheme = { kind: 'github' };
const stamped: SignatureScheme = { kind: 'hmac-sha256', header: 'X-Desk-Signature', prefix: 'v1=', encoding: 'base64', timestamp: { header: 'X-Desk-Timestamp', toleranceSeconds: 300 } };

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof WebhookUnauthenticated) return err.reason;
    throw err;
  }
  return 'accepted';
}

describe('HMAC-SHA256 verification', () => {
  const body = Buffer.from('{"action":"opened"}');

  it('accepts a GitHub X-Hub-Signature-256 signature made with the secret', () => {
    const headers = signBody(github, SECRET, body);
    expect(headers['x-hub-signature-256']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(refusal(() => verifySignature('gh', github, [SECRET], headers, body, NOW))).toBe('accepted');
    // Header names are case-insensitive, as HTTP stacks differ.
    expect(refusal(() => verifySignature('gh', github, [SECRET], { 'X-Hub-Signature-256': headers['x-hub-signature-256'] }, body, NOW))).toBe('accepted');
  });

  it('refuses a wrong secret, a tampered body, a missing or malformed or repeated header', () => {
    const good = signBody(github, SECRET, body);
    expect(refusal(() => verifySignature('gh', github, [SECRET], signBody(github, OTHER, body), body, NOW))).toBe('signature_mismatch');
    expect(refusal(() => verifySignature('gh', github, [SECRET], good, Buffer.from('{"action":"opened" }'), NOW))).toBe('signature_mismatch');
    expect(refusal(() => verifySignature('gh', github, [SECRET], {}, body, NOW))).toBe('missing_signature');
    expect(refusal(() => verifySignature('gh', github, [SECRET], { 'x-hub-signature-256': 'sha1=abc' }, body, NOW))).toBe('malformed_signature');
    expect(refusal(() => verifySignature('gh', github, [SECRET], { 'x-hub-signature-256': `sha256=${'zz'.repeat(32)}` }, body, NOW))).toBe('malformed_signature');
    const sig = good['x-hub-signature-256'] as string;
    expect(refusal(() => verifySignature('gh', github, [SECRET], { 'x-hub-signature-256': [sig, sig] }, body, NOW))).toBe('malformed_signature');
  });

  it('accepts any configured secret, so secrets rotate without downtime', () => {
    expect(refusal(() => verifySignature('gh', github, [OTHER, SECRET], signBody(github, SECRET, body), body, NOW))).toBe('accepted');
  });

  it('verifies a timestamped scheme over "<timestamp>.<body>" within the tolerance', () => {
    const headers = signBody(stamped, SECRET, body, NOW_S - 299);
    expect(headers['x-desk-signature']).toMatch(/^v1=[A-Za-z0-9+/]{43}=$/);
    expect(refusal(() => verifySignature('desk', stamped, [SECRET], headers, body, NOW))).toBe('accepted');
  });

  it('refuses stale and far-future timestamps, missing ones, and a timestamp swapped after signing', () => {
    expect(refusal(() => verifySignature('desk', stamped, [SECRET], signBody(stamped, SECRET, body, NOW_S - 301), body, NOW))).toBe('stale_timestamp');
    expect(refusal(() => verifySignature('desk', stamped, [SECRET], signBody(stamped, SECRET, body, NOW_S + 301), body, NOW))).toBe('stale_timestamp');
    const headers = signBody(stamped, SECRET, body, NOW_S - 1000);
    expect(refusal(() => verifySignature('desk', stamped, [SECRET], { ...headers, 'x-desk-timestamp': String(NOW_S) }, body, NOW))).toBe('signature_mismatch');
    expect(refusal(() => verifySignature('desk', stamped, [SECRET], { 'x-desk-signature': headers['x-desk-signature'] }, body, NOW))).toBe('missing_timestamp');
    expect(refusal(() => verifySignature('desk', stamped, [SECRET], { ...headers, 'x-desk-timestamp': '2026-05-04' }, body, NOW))).toBe('malformed_timestamp');
  });

  it('never puts the signature or the secret into the error', () => {
    const headers = signBody(github, OTHER, body);
    try {
      verifySignature('gh', github, [SECRET], headers, body, NOW);
      expect.unreachable();
    } catch (err) {
      const text = JSON.stringify({ m: (err as Error).message, d: (err as WebhookUnauthenticated).details });
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain((headers['x-hub-signature-256'] as string).slice(7));
      expect(webhookHttpStatus(err)).toBe(401);
    }
  });
});

describe('JSON pointers', () => {
  const doc = { ticket: { id: 17, 'a/b': { 'm~n': 'deep' }, tags: ['x', 'y'] } };
  it('resolves RFC 6901 pointers with escapes and array indices', () => {
    expect(resolvePointer(doc, '/ticket/id')).toBe(17);
    expect(resolvePointer(doc, '/ticket/a~1b/m~0n')).toBe('deep');
    expect(resolvePointer(doc, '/ticket/tags/1')).toBe('y');
    expect(resolvePointer(doc, '/ticket/tags/01')).toBeUndefined();
    expect(resolvePointer(doc, '/ticket/missing/x')).toBeUndefined();
    expect(resolvePointer(doc, '')).toBe(doc);
  });
  it('refuses malformed pointers at configuration time', () => {
    expect(() => parsePointer('ticket/id', 'webhooks[0].mapping.id.pointer')).toThrow(/webhooks\[0\]\.mapping\.id\.pointer/);
    expect(() => parsePointer('/a~2')).toThrow(/invalid escape/);
  });
});

const ghIssue = {
  action: 'opened',
  issue: {
    id: 2338442233,
    number: 42,
    title: 'Checkout returns 500 for EUR carts',
    body: null,
    html_url: 'https://github.com/acme/shop/issues/42',
    user: { login: 'octocat', id: 1 },
    labels: [],
    state: 'open',
  },
  repository: { id: 1296269, full_name: 'acme/shop' },
  sender: { login: 'octocat', id: 1 },
};
const ghHeaders = (event = 'issues', delivery = '72d3162e-cc78-11e3-81ab-4c9367dc0958') => ({ 'x-github-event': event, 'x-github-delivery': delivery });

describe('payload mappings', () => {
  it('maps a GitHub issues.opened delivery (null body becomes empty)', () => {
    expect(mapPayload('github', { kind: 'github-issues' }, ghHeaders(), ghIssue)).toEqual({
      kind: 'ticket',
      deliveryId: '72d3162e-cc78-11e3-81ab-4c9367dc0958',
      title: 'Checkout returns 500 for EUR carts',
      body: '',
      event: 'issues.opened',
      url: 'https://github.com/acme/shop/issues/42',
    });
  });

  it('ignores ping, other events and unconfigured actions', () => {
    expect(mapPayload('github', { kind: 'github-issues' }, ghHeaders('ping'), { zen: 'Keep it logically awesome.' })).toEqual({ kind: 'ignored', reason: 'ping' });
    expect(mapPayload('github', { kind: 'github-issues' }, ghHeaders('push'), {})).toEqual({ kind: 'ignored', reason: 'event push' });
    expect(mapPayload('github', { kind: 'github-issues' }, ghHeaders(), { ...ghIssue, action: 'labeled' })).toEqual({ kind: 'ignored', reason: 'action labeled' });
    expect(mapPayload('github', { kind: 'github-issues', actions: ['opened', 'reopened'] }, ghHeaders(), { ...ghIssue, action: 'reopened' })).toMatchObject({ kind: 'ticket' });
  });

  it('names the missing field of a GitHub delivery', () => {
    const e = (() => {
      try {
        mapPayload('github', { kind: 'github-issues' }, ghHeaders(), { ...ghIssue, issue: { ...ghIssue.issue, title: null } });
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(WebhookInvalidPayload);
    expect((e as WebhookInvalidPayload).details.path).toBe('/issue/title');
    expect(() => mapPayload('github', { kind: 'github-issues' }, { 'x-github-event': 'issues' }, ghIssue)).toThrow(/header x-github-delivery is missing/);
  });

  it('maps a generic payload by JSON pointers, numbers as ids, optional fields left out', () => {
    const payload = { event: { uuid: 'd-1' }, ticket: { id: 991, subject: 'VPN down', description: 'Since 9am', org: { slug: 'acme' } } };
    expect(mapPayload('desk', { kind: 'generic', id: { pointer: '/ticket/id' }, title: '/ticket/subject', body: '/ticket/description', customer: '/ticket/org/slug' }, {}, payload)).toEqual({
      kind: 'ticket',
      deliveryId: '991',
      title: 'VPN down',
      body: 'Since 9am',
      customer: 'acme',
    });
    expect(mapPayload('desk', { kind: 'generic', id: { header: 'X-Delivery' }, title: '/ticket/subject' }, { 'x-delivery': 'h-7' }, payload)).toEqual({
      kind: 'ticket',
      deliveryId: 'h-7',
      title: 'VPN down',
      body: '',
    });
  });

  it('refuses a generic payload whose id is missing or whose body is not text, naming the pointer', () => {
    const m = { kind: 'generic' as const, id: { pointer: '/id' }, title: '/t', body: '/b' };
    expect(() => mapPayload('desk', m, {}, { t: 'x' })).toThrow(/\/id is missing/);
    expect(() => mapPayload('desk', m, {}, { id: 'a', t: 'x', b: { html: '<p>' } })).toThrow(/\/b must be a string/);
    expect(() => mapPayload('desk', m, {}, { id: '  ', t: 'x' })).toThrow(/\/id must not be empty/);
  });
});

describe('webhook handler', () => {
  const sources: WebhookSourceConfig[] = [
    { name: 'github', secrets: [SECRET], signature: github, mapping: { kind: 'github-issues' }, customer: 'acme' },
    { name: 'desk', secrets: [SECRET], signature: stamped, mapping: { kind: 'generic', id: { pointer: '/id' }, title: '/subject', body: '/text', customer: '/org' }, maxBodyBytes: 512 },
  ];
  const setup = () => {
    const sink = new InMemoryArrivalSink();
    const handler = createWebhookHandler({ sources, sink, clock: manualClock(NOW) });
    return { sink, handler };
  };
  const ghBody = JSON.stringify(ghIssue);

  it('opens one case for a signed GitHub delivery, and answers 200 with the same case on redelivery', async () => {
    const { sink, handler } = setup();
    const req = { source: 'github', headers: { ...ghHeaders(), ...signBody(github, SECRET, ghBody) }, rawBody: ghBody };
    const first = await handler.handle(req);
    expect(first).toMatchObject({ status: 201, created: true, originKey: 'webhook:github:72d3162e-cc78-11e3-81ab-4c9367dc0958' });
    const again = await handler.handle(req);
    expect(again).toMatchObject({ status: 200, created: false });
    expect(again.status !== 202 && first.status !== 202 && again.caseId === first.caseId).toBe(true);
    expect(sink.opened()).toEqual([
      {
        source: 'webhook',
        originKey: 'webhook:github:72d3162e-cc78-11e3-81ab-4c9367dc0958',
        customer: 'acme',
        title: 'Checkout returns 500 for EUR carts',
        body: '',
        receivedAt: NOW.toISOString(),
        attachments: [],
        raw: {
          kind: 'webhook',
          source: 'github',
          mapping: 'github-issues',
          deliveryId: '72d3162e-cc78-11e3-81ab-4c9367dc0958',
          event: 'issues.opened',
          url: 'https://github.com/acme/shop/issues/42',
          bodySha256: sha256Hex(ghBody),
        },
      },
    ]);
  });

  it('the same delivery sent 10 times at once opens one case', async () => {
    const { sink, handler } = setup();
    const req = { source: 'github', headers: { ...ghHeaders('issues', 'burst-1'), ...signBody(github, SECRET, ghBody) }, rawBody: Buffer.from(ghBody) };
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => handler.handle(req)));
    expect(outcomes.filter((o) => o.status === 201)).toHaveLength(1);
    expect(new Set(outcomes.map((o) => (o.status === 202 ? '' : o.caseId))).size).toBe(1);
    expect(sink.opened()).toHaveLength(1);
  });

  it('refuses unsigned, mis-signed and replayed requests with 401 and stores nothing', async () => {
    const { sink, handler } = setup();
    const deskBody = JSON.stringify({ id: 't-1', subject: 'VPN down', text: 'help', org: 'acme' });
    const attempts = [
      { source: 'github', headers: ghHeaders(), rawBody: ghBody },
      { source: 'github', headers: { ...ghHeaders(), ...signBody(github, OTHER, ghBody) }, rawBody: ghBody },
      { source: 'github', headers: { ...ghHeaders(), ...signBody(github, SECRET, ghBody) }, rawBody: ghBody.replace('500', '502') },
      { source: 'desk', headers: signBody(stamped, SECRET, deskBody, NOW_S - 3600), rawBody: deskBody },
    ];
    for (const req of attempts) {
      const err = await handler.handle(req).then(
        () => null,
        (e: unknown) => e,
      );
      expect(webhookHttpStatus(err)).toBe(401);
    }
    expect(sink.calls).toEqual([]);
  });

  it('maps the generic source and acknowledges ignorable GitHub events without storing', async () => {
    const { sink, handler } = setup();
    const deskBody = JSON.stringify({ id: 't-1', subject: ' VPN\n down ', text: 'help\r\nplease', org: 'globex' });
    const opened = await handler.handle({ source: 'desk', headers: signBody(stamped, SECRET, deskBody, NOW_S), rawBody: deskBody });
    expect(opened).toMatchObject({ status: 201, originKey: 'webhook:desk:t-1' });
    expect(sink.opened()[0]).toMatchObject({ title: 'VPN down', body: 'help\nplease', customer: 'globex' });
    const ping = JSON.stringify({ zen: 'hi', hook_id: 1 });
    expect(await handler.handle({ source: 'github', headers: { ...ghHeaders('ping'), ...signBody(github, SECRET, ping) }, rawBody: ping })).toEqual({ status: 202, ignored: 'ping' });
    expect(sink.calls).toHaveLength(1);
  });

  it('maps unknown sources to 404, oversized bodies to 413 and bad JSON to 422, storing nothing', async () => {
    const { sink, handler } = setup();
    const statusOf = (p: Promise<unknown>) => p.then(() => 0, (e: unknown) => webhookHttpStatus(e));
    expect(await statusOf(handler.handle({ source: 'nope', headers: {}, rawBody: '{}' }))).toBe(404);
    const big = JSON.stringify({ id: 'x', subject: 'y', text: 'z'.repeat(600) });
    expect(await statusOf(handler.handle({ source: 'desk', headers: signBody(stamped, SECRET, big, NOW_S), rawBody: big }))).toBe(413);
    const notJson = 'id=1&subject=x';
    expect(await statusOf(handler.handle({ source: 'desk', headers: signBody(stamped, SECRET, notJson, NOW_S), rawBody: notJson }))).toBe(422);
    const noTitle = JSON.stringify({ id: 'x' });
    expect(await statusOf(handler.handle({ source: 'desk', headers: signBody(stamped, SECRET, noTitle, NOW_S), rawBody: noTitle }))).toBe(422);
    expect(sink.calls).toEqual([]);
  });

  it('refuses bad configuration up front, naming the field', () => {
    const sink = new InMemoryArrivalSink();
    const base = sources[0] as WebhookSourceConfig;
    const attempt = (s: WebhookSourceConfig) => {
      try {
        createWebhookHandler({ sources: [s], sink });
      } catch (err) {
        return isEverdictError(err, 'invalid_config') ? err.details.path : 'other';
      }
      return 'accepted';
    };
    expect(attempt({ ...base, secrets: ['short'] })).toBe('webhooks[0].secrets[0]');
    expect(attempt({ ...base, secrets: [] })).toBe('webhooks[0].secrets');
    expect(attempt({ ...base, name: 'Has Space' })).toBe('webhooks[0].name');
    expect(attempt({ ...base, mapping: { kind: 'generic', id: { pointer: 'id' }, title: '/t' } })).toBe('webhooks[0].mapping.id.pointer');
    expect(attempt(base)).toBe('accepted');
    expect(() => createWebhookHandler({ sources: [base, base], sink })).toThrow(/configured twice/);
  });
});
