/**
 * The Grafana dashboard and the alert rules as an on-call engineer meets them:
 * - every panel query is PromQL Prometheus accepts (promtool check rules, with Grafana's variables
 *   bound the way Grafana binds them), naming only catalogued, exported metrics and their labels;
 * - every alert links (annotations.runbook_url) its own section of the README's Runbook, and that
 *   section says what the alert means, what to check and what to do; the Runbook has no section
 *   for an alert that does not exist;
 * - on a real node (`everdict start`, embedded: every service in one process), every metric a
 *   panel or an alert names is on the live /metrics with its catalogued type, and one demo case
 *   moves the on-call series: model calls and tokens by route, a task parked on its gate, the open
 *   gate and how long it has waited.
 *
 * promtool: $PROMTOOL, else PATH; the checks that need it fail when it is missing (.ci/run
 * installs Debian's `prometheus`). The node is the compiled CLI: run `npx tsc -b` first.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { eventually, promtool } from '@everdict/testkit';
import { startEverdict } from '../embedded/node.js';
import type { EverdictNode } from '../embedded/node.js';
import { baseMetricName, groupingLabels, metricNames } from './promql.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const readText = (...parts: string[]) => readFileSync(join(ROOT, ...parts), 'utf8');

interface CatalogEntry {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary';
  labels: string[];
  status: 'exported' | 'planned' | 'synthetic';
}
interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  targets?: Array<{ refId?: string; expr?: string; legendFormat?: string }>;
}
interface AlertRule {
  alert?: string;
  expr: string;
  annotations?: Record<string, string>;
}

const catalog = (JSON.parse(readText('infra', 'metrics-catalog.json')) as { metrics: CatalogEntry[] }).metrics;
const catalogByName = new Map(catalog.map((m) => [m.name, m]));
const catalogNames = new Set(catalogByName.keys());
const panels = (JSON.parse(readText('infra', 'grafana', 'dashboards', 'everdict.json')) as { panels: Panel[] }).panels.filter((p) => p.type !== 'row');
const queries = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p, refId: t.refId ?? '?', expr: t.expr ?? '', legend: t.legendFormat ?? '' })));
const alerts = (parseYaml(readText('infra', 'prometheus', 'alerts.yml')) as { groups: Array<{ rules: AlertRule[] }> }).groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);
const readme = readText('README.md');

/** Labels every scraped series carries besides its own: set by the process (service) or the scrape. */
const TARGET_LABELS = ['service', 'job', 'instance'];
const namesIn = (expr: string) => metricNames(expr).map((n) => baseMetricName(n, catalogNames));

/**
 * A panel query as Grafana sends it to Prometheus: `$__rate_interval` (and the other interval
 * variables) become a duration, the `service` variable a regex its "All" value stands for.
 */
function boundQuery(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b/g, '1m').replace(/\$\{?service\}?/g, '.*');
}

/** Label names an expression's selectors match on (`{kind="x", service=~"…"}`). */
function matcherLabels(expr: string): string[] {
  const labels = new Set<string>();
  for (const m of expr.matchAll(/\{([^}]*)\}/g)) for (const l of (m[1] ?? '').matchAll(/([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)/g)) labels.add(l[1]!);
  return [...labels];
}

/** Labels a query's series may carry: its metrics' catalogued labels, the target labels, `le` on histogram buckets. */
function availableLabels(expr: string): Set<string> {
  const names = metricNames(expr);
  return new Set([
    ...TARGET_LABELS,
    ...names.flatMap((n) => catalogByName.get(baseMetricName(n, catalogNames))?.labels ?? []),
    ...(names.some((n) => n.endsWith('_bucket')) ? ['le'] : []),
  ]);
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The `### ` sections under `## Runbook`, by anchor, with their text. */
function runbookSections(markdown: string): Map<string, { heading: string; body: string }> {
  const start = markdown.search(/^## Runbook$/m);
  expect(start, 'README has a "## Runbook" section').toBeGreaterThanOrEqual(0);
  const rest = markdown.slice(start + '## Runbook'.length);
  const end = rest.search(/^## /m);
  const section = end < 0 ? rest : rest.slice(0, end);
  const sections = new Map<string, { heading: string; body: string }>();
  const parts = section.split(/^### /m).slice(1);
  for (const part of parts) {
    const heading = part.slice(0, part.indexOf('\n'));
    sections.set(anchorOf(heading), { heading, body: part.slice(heading.length) });
  }
  return sections;
}

/** Every anchor the README's headings make (duplicates get GitHub's -1, -2 … suffixes). */
function readmeAnchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const m of markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const a = anchorOf(m[1]!);
    const n = seen.get(a) ?? 0;
    seen.set(a, n + 1);
    anchors.add(n === 0 ? a : `${a}-${n}`);
  }
  return anchors;
}

describe('dashboard panels', () => {
  it('has on-call panels for turns, tasks, effects, gates, model calls and intake', () => {
    const named = new Set(queries.flatMap((q) => namesIn(q.expr)));
    for (const m of [
      'everdict_turns_total',
      'everdict_turn_duration_seconds',
      'everdict_active_tasks',
      'everdict_tasks_parked',
      'everdict_tasks_parked_oldest_age_seconds',
      'everdict_effect_unknown_outcomes',
      'everdict_gates_open',
      'everdict_gate_open_wait_seconds',
      'everdict_task_lease_expiries_total',
      'everdict_model_call_duration_seconds',
      'everdict_model_call_errors_total',
      'everdict_model_input_tokens_total',
      'everdict_model_output_tokens_total',
      'everdict_intake_cases_opened_total',
      'everdict_intake_refused_total',
    ]) {
      expect(named.has(m), `a panel shows ${m}`).toBe(true);
    }
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size, 'panel ids are unique').toBe(ids.length);
  });

  it('every panel query parses: promtool check rules on the queries as recording rules, Grafana variables bound', () => {
    expect(queries.length).toBeGreaterThan(20);
    const rules = queries.map((q) => {
      const expr = boundQuery(q.expr);
      expect(expr, `${q.panel.title} (${q.refId}): a variable this test does not bind`).not.toMatch(/\$/);
      return { record: `dashboard:panel_${q.panel.id}_${q.refId}`, expr };
    });
    const file = join(mkdtempSync(join(tmpdir(), 'everdict-dashboard-')), 'dashboard-queries.yml');
    writeFileSync(file, stringifyYaml({ groups: [{ name: 'dashboard-queries', rules }] }));
    const r = promtool(['check', 'rules', file]);
    expect(r.status, r.output).toBe(0);
    expect(r.output).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  it('every panel query names catalogued, exported metrics, and only labels those metrics carry', () => {
    for (const q of queries) {
      const where = `${q.panel.title} (${q.refId})`;
      const names = namesIn(q.expr);
      expect(names.length, `${where}: selects no metric`).toBeGreaterThan(0);
      for (const n of names) expect(catalogByName.get(n)?.status, `${where}: ${n} in infra/metrics-catalog.json`).toBe('exported');
      const available = availableLabels(q.expr);
      for (const l of [...groupingLabels(q.expr), ...matcherLabels(q.expr)]) expect(available.has(l), `${where}: label ${l}`).toBe(true);
      // A legend names labels the query's result keeps: its `by (…)` labels when it aggregates.
      const kept = /\b(sum|max|min|avg|count)\s+by\s*\(/.test(q.expr) ? new Set(groupingLabels(q.expr)) : available;
      for (const m of q.legend.matchAll(/\{\{\s*(\w+)\s*\}\}/g)) expect(kept.has(m[1]!), `${where}: legend label ${m[1]}`).toBe(true);
    }
  });

  it('every alert a panel points to exists', () => {
    const names = new Set(alerts.map((a) => a.alert!));
    for (const p of panels) for (const m of (p.description ?? '').matchAll(/\bEverdict[A-Z]\w+/g)) expect(names.has(m[0]), `${p.title} names alert ${m[0]}`).toBe(true);
  });
});

describe('alerts and their runbooks', () => {
  const sections = runbookSections(readme);
  const anchors = readmeAnchors(readme);

  it('every alert links its own README Runbook section, which says what it means, what to check and what to do', () => {
    expect(alerts.length).toBeGreaterThan(10);
    const linked = new Map<string, string>();
    for (const a of alerts) {
      const url = a.annotations?.runbook_url ?? '';
      const anchor = /^README\.md#([\w-]+)$/.exec(url)?.[1];
      expect(anchor, `${a.alert}: runbook_url ${JSON.stringify(url)} is README.md#<anchor>`).toBeDefined();
      expect(anchors.has(anchor!), `${a.alert}: README has no heading for #${anchor}`).toBe(true);
      const section = sections.get(anchor!);
      expect(section?.heading, `${a.alert}: #${anchor} is its own section of the Runbook`).toBe(a.alert);
      for (const part of ['**Means:**', '**Check:**', '**Do:**']) expect(section?.body, `${a.alert} runbook: ${part}`).toContain(part);
      expect(linked.get(anchor!), `#${anchor} is linked by two alerts`).toBeUndefined();
      linked.set(anchor!, a.alert!);
    }
  });

  it('the Runbook has no section for an alert that does not exist', () => {
    const names = new Set(alerts.map((a) => a.alert!));
    expect([...sections.values()].map((s) => s.heading).filter((h) => !names.has(h))).toEqual([]);
  });
});

/** The value of the sample `name{labels…}` on a /metrics page (every label in `labels` must match), or undefined. */
function sample(body: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of body.split('\n')) {
    const m = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) return Number(m[3]);
  }
  return undefined;
}

describe('on a real node (embedded, every service in one process)', () => {
  let node: EverdictNode | undefined;

  beforeAll(async () => {
    node = await startEverdict({ env: { EVERDICT_DATA_DIR: join(mkdtempSync(join(tmpdir(), 'everdict-dashboards-')), 'data') } });
  }, 120_000);

  afterAll(async () => {
    expect(await node?.stop('SIGTERM')).toBe(0);
  });

  const metricsPage = async () => {
    const res = await fetch(`${node!.url}/metrics`);
    expect(res.status).toBe(200);
    return res.text();
  };

  it('every metric a panel or an alert names is on the live /metrics, with its catalogued type', async () => {
    const onPage = new Map([...(await metricsPage()).matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    const named = new Set([...queries.flatMap((q) => namesIn(q.expr)), ...alerts.flatMap((a) => namesIn(a.expr))]);
    for (const n of named) {
      const entry = catalogByName.get(n);
      expect(entry, `${n} in infra/metrics-catalog.json`).toBeDefined();
      if (entry!.status === 'synthetic') continue; // made by Prometheus (`up`), never by a node
      expect(onPage.get(n), `${n} on the live /metrics`).toBe(entry!.type);
    }
  });

  it('a demo case moves the on-call series: model calls and tokens by route, a task parked on its gate, the open gate and its wait', async () => {
    const res = await fetch(`${node!.url}/v1/cases`, {
      method: 'POST',
      headers: { authorization: 'Bearer everdict-demo-requester', 'content-type': 'application/json' },
      body: JSON.stringify({ caseType: 'demo', title: 'Status update, please' }),
    });
    expect(res.status).toBe(201);
    // The agent reads, proposes, the auditor approves, and the task parks on the gate until a
    // human decides; the reconciler reports the open gate on its next tick.
    const body = await eventually(
      async () => {
        const page = await metricsPage();
        return (sample(page, 'everdict_gates_open', { kind: 'write' }) ?? 0) >= 1 && (sample(page, 'everdict_gate_open_wait_seconds', { kind: 'write', stat: 'max' }) ?? 0) > 0 ? page : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, what: 'the demo case waiting on an open write gate, on /metrics' },
    );
    expect(sample(body, 'everdict_tasks_parked', { park_reason: 'gate' }), 'parked on its gate').toBeGreaterThanOrEqual(1);
    expect(sample(body, 'everdict_gate_open_wait_seconds', { kind: 'write', stat: 'p50' }), 'one open gate: its median is its wait').toBeGreaterThan(0);
    expect(sample(body, 'everdict_gates_open', { kind: 'consent' })).toBe(0);
    // Model calls are counted where they are made, by route: the agent's turns and its auditor.
    expect(sample(body, 'everdict_model_call_duration_seconds_count', { route: 'demo-agent', outcome: 'ok' }), 'agent model calls').toBeGreaterThanOrEqual(2);
    expect(sample(body, 'everdict_model_call_duration_seconds_count', { route: 'demo-auditor', outcome: 'ok' }), 'auditor model calls').toBeGreaterThanOrEqual(1);
    // The demo script reports 150 input and 30 output tokens on the agent's first call.
    expect(sample(body, 'everdict_model_input_tokens_total', { route: 'demo-agent' })).toBeGreaterThanOrEqual(150);
    expect(sample(body, 'everdict_model_output_tokens_total', { route: 'demo-agent' })).toBeGreaterThanOrEqual(30);
    expect(sample(body, 'everdict_model_call_errors_total', { route: 'demo-agent' }), 'no failed call').toBeUndefined();
    expect(sample(body, 'everdict_turns_total', { outcome: 'parked' }), 'the turn that parked').toBeGreaterThanOrEqual(1);
    expect(sample(body, 'everdict_intake_cases_opened_total', { source: 'api' })).toBe(1);
  }, 90_000);
});
