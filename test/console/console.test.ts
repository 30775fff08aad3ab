/**
 * The operator console in a real browser (issue 14, browser acceptance): Debian's chromium,
 * driven headless by playwright-core, against a real demo fleet node (node.ts: every service on
 * real Postgres and RabbitMQ, the sample config and its demo notebook). In order, on one node:
 *
 * - the approver signs in with its token (exchanged for the session cookie) and sees the cases,
 *   searched by origin;
 * - the demo case shows its agent graph and plan, and its gate;
 * - the gate page shows the exact packet and its digest; the approver holds the roles of both
 *   required decisions, and one Approve sends that digest once per decision, each recorded (201);
 * - the case page, left open, shows the ledger growing live as the effect executes — and the
 *   browser is taken offline mid-stream and back: the stream resumes from its last seq, and the
 *   seqs shown are exactly the ledger's (GET ledger), no duplicate, no gap;
 * - a principal of another customer gets the 404 page for the case's URL; the demo requester
 *   (no approver role) gets the 404 page for the gate and no decide action, and the API answers
 *   its forced decision 403.
 *
 * A screenshot of every page is kept in test-artifacts/console/. Chromium missing fails the file.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@everdict/testkit';
import { CHROMIUM, REPO, TOKENS, requireFreshConsoleBuild, call, cuttableLink, ledgerSeqs, startDemoNode } from './node.js';
import type { CuttableLink, DemoNode } from './node.js';

const ARTIFACTS = join(REPO, 'test-artifacts', 'console');
const UI_WAIT = 30_000;

let node: DemoNode | undefined;
/** The approver's browser reaches the node through this link, so its connections can be cut. */
let link: CuttableLink | undefined;
let browser: Browser | undefined;
let caseId = '';
let gateId = '';
let digest = '';

/** Every page error and console error of every context, printed when a test fails to find something. */
function watch(context: BrowserContext, who: string): BrowserContext {
  context.on('weberror', (e) => console.error(`[${who}] page error: ${e.error().message}`));
  context.on('console', (m) => {
    if (m.type() === 'error' && !m.text().includes('Failed to load resource')) console.error(`[${who}] console: ${m.text()}`);
  });
  return context;
}

const shot = (page: Page, name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });

async function signIn(context: BrowserContext, token: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${node!.url}/ui/`);
  await page.getByTestId('token').fill(token);
  await page.getByTestId('sign-in').click();
  await page.getByTestId('principal').waitFor({ timeout: UI_WAIT });
  return page;
}

/** The seqs the timeline shows, in ascending order, as rendered (duplicates would show twice). */
async function renderedSeqs(page: Page): Promise<number[]> {
  const seqs = await page.getByTestId('ledger-entry').evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-seq'))));
  return seqs.sort((a, b) => a - b);
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install the Debian package chromium (.ci/run does)`);
  mkdirSync(ARTIFACTS, { recursive: true });
  requireFreshConsoleBuild();
  node = await startDemoNode('console_ui');
  link = await cuttableLink(node.url);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
  const opened = await call(node.url, 'POST', '/v1/cases', TOKENS.requester, { caseType: 'demo', title: 'Status update, please' });
  expect(opened.status, JSON.stringify(opened.body)).toBe(201);
  caseId = opened.body['caseId'] as string;
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await link?.close();
  await node?.stop();
});

describe('operator console in chromium', () => {
  let approver: BrowserContext;
  let casePage: Page;

  it('signs in with a token and lists the cases', async () => {
    approver = watch(await browser!.newContext({ viewport: { width: 1400, height: 1000 } }), 'approver');
    const page = await approver.newPage();
    await page.goto(`${link!.url}/ui/cases/${caseId}`);
    await page.getByTestId('signin-form').waitFor();
    await shot(page, 'signin');
    await page.getByTestId('token').fill(TOKENS.approver);
    await page.getByTestId('sign-in').click();
    // Signing in lands on the page asked for; the session is a cookie the page script cannot read.
    await page.getByTestId('case-page').waitFor({ timeout: UI_WAIT });
    const cookies = await approver.cookies(link!.url);
    expect(cookies.find((c) => c.name === 'everdict_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    expect(await page.evaluate(() => document.cookie)).not.toContain('everdict_session');
    await page.getByRole('link', { name: 'Cases' }).click();
    await page.locator(`[data-testid="case-row"][data-case-id="${caseId}"]`).waitFor({ timeout: UI_WAIT });
    // Search by origin: the API's cases are `api:<principal>:…`; none came by mail.
    const search = page.getByTestId('origin-search');
    await search.fill('mail:');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByText('No case matches.').waitFor({ timeout: UI_WAIT });
    expect(page.url()).toContain('origin=mail');
    await search.fill('api:demo-requester:');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.locator(`[data-testid="case-row"][data-case-id="${caseId}"]`).waitFor({ timeout: UI_WAIT });
    await shot(page, 'cases');
    casePage = page;
  });

  it('opens the demo case: its agent graph, plan and gate', async () => {
    const page = casePage;
    await page.locator(`[data-testid="case-row"][data-case-id="${caseId}"] a`).click();
    await page.getByTestId('case-page').waitFor();
    const root = page.getByTestId('task-node').first();
    await expect.poll(() => root.locator('.task-profile').first().textContent(), { timeout: UI_WAIT }).toBe('demo-agent');
    // The gate appears once the proposal is audited; the page refreshes on each ledger record.
    const gateRow = page.getByTestId('case-gate').first();
    await gateRow.waitFor({ timeout: 60_000 });
    gateId = (await gateRow.getAttribute('data-gate-id'))!;
    expect(await gateRow.getAttribute('data-state')).toBe('open');
    expect(await root.getAttribute('data-state')).toBe('parked');
    const plan = page.getByTestId('plan');
    await expect.poll(() => plan.getByTestId('plan-step').count(), { timeout: UI_WAIT }).toBeGreaterThan(0);
    expect(await plan.textContent()).toContain('post-status-note');
    await shot(page, 'case');
  });

  it('shows the exact packet of the gate and approves it with its digest', async () => {
    const api = await call(node!.url, 'GET', `/v1/gates/${gateId}`, TOKENS.approver);
    expect(api.status).toBe(200);
    digest = api.body['packetDigest'] as string;
    const gatePage = await approver.newPage();
    await gatePage.goto(`${link!.url}/ui/gates/${gateId}`);
    await gatePage.getByTestId('gate-page').waitFor({ timeout: UI_WAIT });
    expect((await gatePage.getByTestId('packet-digest').textContent())?.trim()).toBe(digest);
    expect(await gatePage.getByTestId('packet-operation').textContent()).toContain('notes/notes.append');
    expect(await gatePage.getByTestId('packet-params').textContent()).toContain('Status: the request was received');
    expect(await gatePage.getByTestId('packet-revert').textContent()).toContain('manual');
    expect(await gatePage.getByTestId('packet-evidence').getByTestId('evidence').count()).toBeGreaterThan(0);
    await shot(gatePage, 'gate');

    const before = (await renderedSeqs(casePage)).length;
    // A mark on the case page's window: still there afterwards means the page was never reloaded.
    await casePage.evaluate(() => Object.assign(window, { consoleTestMark: 'same page' }));
    await gatePage.getByTestId('approve').click();
    // The approver holds both required decisions' roles: one click, two requests, two decisions.
    const results = gatePage.getByTestId('decision-result');
    await expect.poll(() => results.count(), { timeout: UI_WAIT }).toBe(2);
    const answered = await results.evaluateAll((els) => els.map((e) => [e.querySelector('code')?.textContent, e.getAttribute('data-status'), e.textContent]));
    expect(answered.map(([d, status]) => `${d} ${status}`).sort(), JSON.stringify(answered)).toEqual(['owner-consent 201', 'publish-note 201']);
    const decided = await call(node!.url, 'GET', `/v1/gates/${gateId}`, TOKENS.approver);
    expect(decided.body['state']).toBe('approved');
    expect(decided.body['decisions']).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ decision: 'publish-note', role: 'approver', verdict: 'approve', principal: 'demo-approver', digest }),
        expect.objectContaining({ decision: 'owner-consent', role: 'notebook-owner', verdict: 'approve', principal: 'demo-approver', digest }),
      ]),
    );
    expect(decided.body['decisions']).toHaveLength(2);

    // Mid-stream, while the effect executes, every connection of the browser is killed and new
    // ones refused for a moment: the open ledger stream dies; once the link is back, it resumes.
    await link!.cut(1500);
    expect(link!.cuts(), 'open connections were cut').toBeGreaterThan(0);
    // Live: the case page (never reloaded) shows new records and the finished root task.
    await expect.poll(async () => (await renderedSeqs(casePage)).length, { timeout: 60_000 }).toBeGreaterThan(before);
    await expect
      .poll(() => casePage.getByTestId('task-node').first().getAttribute('data-state'), { timeout: 60_000 })
      .toBe('done');
    expect(await casePage.evaluate(() => (window as unknown as { consoleTestMark?: string }).consoleTestMark)).toBe('same page');
    await gatePage.close();
  });

  it('resumed the stream from its last seq: the timeline is exactly the ledger, no duplicate, no gap', async () => {
    const status = casePage.getByTestId('ledger-status');
    expect(Number(await status.getAttribute('data-reconnects')), 'the cut reopened the stream').toBeGreaterThanOrEqual(1);
    await expect.poll(() => status.getAttribute('data-status'), { timeout: UI_WAIT }).toBe('live');
    // Settled: the API's ledger and the rendered timeline agree record for record.
    await eventually(
      async () => {
        const [shown, stored] = [await renderedSeqs(casePage), await ledgerSeqs(node!.url, caseId, TOKENS.approver)];
        return JSON.stringify(shown) === JSON.stringify(stored) && shown.length > 0;
      },
      { timeoutMs: UI_WAIT, what: 'the rendered ledger equal to GET ledger' },
    );
    const shown = await renderedSeqs(casePage);
    const stored = await ledgerSeqs(node!.url, caseId, TOKENS.approver);
    expect(shown).toEqual(stored);
    expect(new Set(shown).size).toBe(shown.length);
    // Resumed from the cursor: the server sent nothing twice (the timeline would drop it, and count it).
    expect(await status.getAttribute('data-duplicates')).toBe('0');
    expect(shown).toEqual(Array.from({ length: shown.length }, (_, i) => i + 1));
    expect(await casePage.getByTestId('ledger-gaps').count()).toBe(0);
    const kinds = await casePage.getByTestId('ledger-entry').evaluateAll((els) => els.map((e) => e.getAttribute('data-kind')));
    expect(kinds.some((k) => k !== null && /effect/.test(k)), `an effect record in ${kinds.join(', ')}`).toBe(true);
    await shot(casePage, 'case-after-effect');
  });

  it('another customer gets the 404 page for the case URL', async () => {
    const outsider = watch(await browser!.newContext({ viewport: { width: 1400, height: 900 } }), 'outsider');
    const page = await signIn(outsider, TOKENS.outsider);
    await page.goto(`${node!.url}/ui/cases/${caseId}`);
    await page.getByTestId('not-found').waitFor({ timeout: UI_WAIT });
    expect(await page.getByTestId('case-page').count()).toBe(0);
    expect((await call(node!.url, 'GET', `/v1/cases/${caseId}`, TOKENS.outsider)).status).toBe(404);
    await shot(page, 'not-found');
    // Nor does it see the case in its list.
    await page.goto(`${node!.url}/ui/cases`);
    await page.getByTestId('cases-table').waitFor({ timeout: UI_WAIT });
    expect(await page.locator(`[data-case-id="${caseId}"]`).count()).toBe(0);
    await outsider.close();
  });

  it('the requester has no decide action, and a forced decision is refused 403 by the API', async () => {
    const requester = watch(await browser!.newContext({ viewport: { width: 1400, height: 1000 } }), 'requester');
    const page = await signIn(requester, TOKENS.requester);
    await page.goto(`${node!.url}/ui/cases/${caseId}`);
    await page.getByTestId('case-gate').first().waitFor({ timeout: UI_WAIT });
    expect(await page.getByTestId('approve').count()).toBe(0);
    await page.goto(`${node!.url}/ui/gates/${gateId}`);
    await page.getByTestId('not-found').waitFor({ timeout: UI_WAIT });
    expect(await page.getByTestId('approve').count()).toBe(0);
    // Forced from the signed-in page itself: cookie session and CSRF token, no role.
    const forced = await page.evaluate(
      async ({ id, d }) => {
        const csrf = document.cookie.split('; ').find((c) => c.startsWith('everdict_csrf='))?.split('=')[1] ?? '';
        const res = await fetch(`/v1/gates/${id}/decisions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': csrf }, body: JSON.stringify({ decision: 'publish-note', verdict: 'approve', digest: d }) });
        return { status: res.status, body: (await res.json()) as { error?: string } };
      },
      { id: gateId, d: digest },
    );
    expect(forced).toMatchObject({ status: 403, body: { error: 'role_required' } });

    // The operator pages, as the demo requester (role operator) sees them.
    await page.getByRole('link', { name: 'Exceptions' }).click();
    await page.getByTestId('exceptions-page').waitFor({ timeout: UI_WAIT });
    await shot(page, 'exceptions');
    await page.getByRole('link', { name: 'Fleet' }).click();
    await page.getByTestId('fleet-page').waitFor({ timeout: UI_WAIT });
    expect(await page.getByTestId('fleet-queue').count()).toBeGreaterThan(0);
    const services = await page.getByTestId('fleet-service').evaluateAll((rows) => rows.map((r) => r.querySelector('td')?.textContent));
    expect(services.sort()).toEqual(['execution-coordinator', 'gate', 'intake', 'reconciler', 'turn-worker']);
    await shot(page, 'fleet');
    await page.getByRole('link', { name: 'Gates' }).click();
    await page.getByTestId('gates-page').waitFor({ timeout: UI_WAIT });
    await shot(page, 'gates');
    await requester.close();
    await approver.close();
  });
});
