import { describe, expect, it } from 'vitest';
import { carryInbox } from '../src/sql/inbox.js';

const row = { consumer: 'turn-worker', messageId: '0192f0c4-5d6e-7000-8000-000000000001', payloadHash: `sha256:${'ab'.repeat(32)}`, type: 'task.runnable', disposition: 'applied' as const };

describe('carryInbox: which first statements carry a delivery inbox row', () => {
  it('puts the insert in front of a named statement as a WITH, its values after the statement own', () => {
    const q = { name: 'bump', text: 'UPDATE t SET n = n + 1 WHERE id = $1::uuid AND v = $2', values: ['x', 3] };
    const c = carryInbox(q, row)!;
    expect(c.name).toBe('bump:inbox');
    expect(c.text).toMatch(/^WITH ev_inbox AS \(INSERT INTO inbox_messages \(consumer, message_id, payload_hash, type, disposition\)\s+VALUES \(\$3::text, \$4::uuid, \$5::text, \$6::text, \$7::inbox_disposition\)\)\nUPDATE t SET/);
    expect(c.values).toEqual(['x', 3, row.consumer, row.messageId, row.payloadHash, row.type, 'applied']);
    for (const verb of ['SELECT id FROM t WHERE id = $1 FOR UPDATE', '  insert into t VALUES ($1)', 'DELETE FROM t WHERE id = $1']) {
      expect(carryInbox({ name: 's', text: verb, values: [1] }, row)?.text).toContain(`)\n${verb}`);
    }
  });

  it('makes the insert the first entry of a statement with its own WITH (RECURSIVE kept)', () => {
    const q = { name: 'w', text: 'WITH RECURSIVE\n  r(x) AS (SELECT $1::int) SELECT * FROM r', values: [1] };
    const text = carryInbox(q, row)!.text;
    expect(text.startsWith('WITH RECURSIVE ev_inbox AS (INSERT INTO inbox_messages')).toBe(true);
    expect(text).toContain('$6::inbox_disposition)),\n  r(x) AS (SELECT $1::int) SELECT * FROM r');
    expect(carryInbox({ name: 'w', text: 'with a AS (SELECT $1::int) SELECT * FROM a', values: [1] }, row)!.text).toMatch(/^WITH ev_inbox AS \(.*\), a AS \(SELECT \$1::int\) SELECT \* FROM a$/s);
  });

  it('leaves alone what cannot carry it: unnamed, parameterless, session-prepared, several statements, inbox statements, other verbs, names Postgres would cut', () => {
    const ok = { name: 'n', text: 'UPDATE t SET n = 1 WHERE id = $1', values: [1] };
    expect(carryInbox(ok, row)).toBeDefined();
    const refused = [
      { text: ok.text, values: [1] },
      { name: 'n', text: 'UPDATE t SET n = 1' },
      { name: 'n', text: 'UPDATE t SET n = 1', values: [] },
      { ...ok, sessionPrepared: { name: 'ev_x', prepare: 'PREPARE ev_x AS SELECT 1', execute: 'EXECUTE ev_x' } },
      { ...ok, text: 'UPDATE t SET n = 1 WHERE id = $1; SELECT 1' },
      { ...ok, text: 'UPDATE inbox_messages SET disposition = $1' },
      { ...ok, text: 'MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE' },
      { ...ok, text: 'VALUES ($1)' },
      { ...ok, text: '/* x */ UPDATE t SET n = $1' },
      { ...ok, text: 'WITHOUT ($1)' },
      { ...ok, name: 'x'.repeat(58) },
    ];
    for (const q of refused) expect(carryInbox(q, row), JSON.stringify(q)).toBeUndefined();
    expect(carryInbox({ ...ok, name: 'x'.repeat(57) }, row)?.name).toHaveLength(63);
  });
});
