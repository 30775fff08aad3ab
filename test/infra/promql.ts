/**
 * Just enough PromQL reading for the infra checks: which metric names an expression selects,
 * and which labels its aggregations group by. Not a parser — it relies on the expressions in
 * infra/ being ordinary (selectors, functions, aggregations, binary operators).
 */

/** Keywords and operators that look like identifiers but never name a metric. */
const NOT_METRICS = new Set([
  'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool', 'atan2', 'inf', 'nan',
]);

function stripNonSelectors(expr: string): string {
  return expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""') // string literals
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // range and subquery windows (incl. Grafana's $__rate_interval)
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // grouping label lists
    .replace(/\$\{?\w+\}?/g, ' ') // dashboard variables
    .replace(/(?<![\w:])\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w:])/gi, ' '); // number literals
}

/** Metric names selected by `expr`, in order of first appearance. */
export function metricNames(expr: string): string[] {
  const s = stripNonSelectors(expr);
  const names: string[] = [];
  for (const m of s.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const word = m[0];
    const rest = s.slice((m.index ?? 0) + word.length).trimStart();
    if (rest.startsWith('(')) continue; // a function or an aggregation operator
    if (NOT_METRICS.has(word.toLowerCase())) continue;
    if (!names.includes(word)) names.push(word);
  }
  return names;
}

/** Label names listed in `by (…)` clauses (and `without (…)`, which also must exist). */
export function groupingLabels(expr: string): string[] {
  const labels = new Set<string>();
  for (const m of expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)) {
    for (const l of (m[1] ?? '').split(',')) if (l.trim()) labels.add(l.trim());
  }
  return [...labels];
}

/** Histograms and summaries are queried through their `_bucket`, `_sum` and `_count` series. */
export function baseMetricName(name: string, known: ReadonlySet<string>): string {
  if (known.has(name)) return name;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  return m && known.has(m[1]!) ? m[1]! : name;
}
