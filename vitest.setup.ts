/**
 * Runs with every test file (vitest.config.ts `setupFiles`): the databases a file created with
 * testkit's `freshDatabase` are dropped once the file is done, if every test and hook of it
 * passed. After any failure they are kept, and named, for inspection; TEST_KEEP_DATABASES=1
 * keeps them always.
 *
 * This afterAll is registered before any hook of the test file, and vitest runs after-hooks in
 * reverse order (sequence.hooks `stack`, the default), so it runs last, once the file's own
 * afterAll hooks have closed its pools and stopped its processes. The drop never terminates a
 * connection: one still open (a pool the file did not close) keeps its database.
 */
import { afterAll } from 'vitest';
import type { RunnerTask } from 'vitest';
import { createdDatabases, dropUnusedDatabase } from '@everdict/testkit';

const failed = (t: RunnerTask): boolean => t.result?.state === 'fail' || (t.type === 'suite' && t.tasks.some(failed));

// The first argument is vitest's fixture context, which must be a destructuring pattern.
// eslint-disable-next-line no-empty-pattern
afterAll(async ({}, file) => {
  const names = [...createdDatabases()];
  createdDatabases().clear();
  if (names.length === 0) return;
  if (failed(file as RunnerTask) || process.env.TEST_KEEP_DATABASES === '1') {
    console.warn(`test databases kept for inspection: ${names.join(' ')}`);
    return;
  }
  const inUse: string[] = [];
  for (const name of names) if (!(await dropUnusedDatabase(name))) inUse.push(name);
  if (inUse.length) console.warn(`test databases still in use after the file, kept: ${inUse.join(' ')}`);
}, 60_000);
