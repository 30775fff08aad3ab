import { existsSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const root = fileURLToPath(new URL('.', import.meta.url));

// Workspace packages resolve to their TypeScript sources in tests, so a stale dist/ never
// hides a change. Unit tests are pure and fast; integration tests talk to real Postgres and
// RabbitMQ (TEST_DATABASE_URL, TEST_AMQP_URL) and isolate themselves per file.
const alias = ['libs', 'services'].flatMap((group) =>
  readdirSync(`${root}${group}`)
    .filter((name) => existsSync(`${root}${group}/${name}/src/index.ts`))
    .map((name) => ({ find: new RegExp(`^@everdict/${name}$`), replacement: `${root}${group}/${name}/src/index.ts` })),
);

export default defineConfig({
  resolve: { alias },
  test: {
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      { resolve: { alias }, test: { name: 'unit', testTimeout: 30_000, include: ['libs/*/test/**/*.unit.test.ts', 'services/*/test/**/*.unit.test.ts', 'cli/test/**/*.unit.test.ts'] } },
      // Timeouts above testkit's readinessBudgetMs cap (150 s), so a slow start on a loaded
      // machine fails with the process's output, not a bare timeout. vitest.setup.ts drops the
      // databases of each file that passed.
      {
        resolve: { alias },
        test: {
          name: 'integration',
          include: ['libs/*/test/**/*.int.test.ts', 'services/*/test/**/*.int.test.ts', 'cli/test/**/*.int.test.ts', 'test/**/*.test.ts'],
          setupFiles: [`${root}vitest.setup.ts`],
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
