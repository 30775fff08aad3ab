/**
 * Five-field cron expressions (minute hour day-of-month month day-of-week), evaluated in UTC at
 * minute granularity: `*`, numbers, ranges `a-b`, lists `a,b`, steps `*\/n` and `a-b/n`;
 * day-of-week 0–7 (0 and 7 are Sunday). As in Vixie cron, when both day fields are restricted
 * a day matches if EITHER matches. Pure: no clock, no I/O.
 */
import { EverdictError } from '@everdict/contracts';

export interface CronSchedule {
  readonly expression: string;
  matches(at: Date): boolean;
}

const FIELDS = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12 },
  { name: 'day of week', min: 0, max: 7 },
] as const;

function invalid(expression: string, why: string, field: string): never {
  throw new EverdictError('invalid_cron', `cron "${expression}": ${why}`, { details: { field } });
}

function parseField(expression: string, text: string, f: (typeof FIELDS)[number], field: string): Set<number> {
  const out = new Set<number>();
  for (const part of text.split(',')) {
    const m = /^(\*|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(part);
    if (!m) invalid(expression, `${f.name} "${part}" is not a number, range, list or step`, field);
    const step = m[4] === undefined ? 1 : Number(m[4]);
    const lo = m[1] === '*' ? f.min : Number(m[2]);
    const hi = m[1] === '*' ? f.max : m[3] !== undefined ? Number(m[3]) : m[4] !== undefined ? f.max : lo;
    if (step < 1 || lo < f.min || hi > f.max || lo > hi) invalid(expression, `${f.name} "${part}" is outside ${f.min}-${f.max}`, field);
    for (let v = lo; v <= hi; v += step) out.add(f.name === 'day of week' && v === 7 ? 0 : v);
  }
  return out;
}

export function parseCron(expression: string, field = 'cron'): CronSchedule {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== 5) invalid(expression, 'needs 5 fields (minute hour day-of-month month day-of-week)', field);
  const [minute, hour, dom, month, dow] = parts.map((p, i) => parseField(expression, p, FIELDS[i]!, field)) as [Set<number>, Set<number>, Set<number>, Set<number>, Set<number>];
  const domAny = parts[2] === '*';
  const dowAny = parts[4] === '*';
  return {
    expression,
    matches(at) {
      if (!minute.has(at.getUTCMinutes()) || !hour.has(at.getUTCHours()) || !month.has(at.getUTCMonth() + 1)) return false;
      const d = dom.has(at.getUTCDate());
      const w = dow.has(at.getUTCDay());
      if (domAny && dowAny) return true;
      if (domAny) return w;
      if (dowAny) return d;
      return d || w;
    },
  };
}

const MINUTE = 60_000;

/** Every slot (whole UTC minute) in (after, through] the schedule matches, oldest first, at most `limit`. */
export function slotsBetween(s: CronSchedule, after: Date, through: Date, limit = 1000): Date[] {
  const out: Date[] = [];
  let t = Math.floor(after.getTime() / MINUTE) * MINUTE + MINUTE;
  for (; t <= through.getTime() && out.length < limit; t += MINUTE) {
    const at = new Date(t);
    if (s.matches(at)) out.push(at);
  }
  return out;
}
