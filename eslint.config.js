// Lint is part of `npm test`. Type-aware rules are left out on purpose: tsc -b already runs
// strict, and the untyped rule set keeps lint under a few seconds on two cores.
import { existsSync, readdirSync } from 'node:fs';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Package boundaries (DESIGN §1): services compose libs; no service imports another service and
// no lib imports a service; only cli/, the composition root, imports services (test/ and bench/
// are cross-service suites). A bare `@everdict/<service>` and a relative path with the service's
// directory as a segment are both refused. test/infra/boundaries.test.ts checks the same rule by
// resolving every import, dynamic imports included.
const SERVICES = readdirSync(new URL('./services/', import.meta.url)).filter((name) => existsSync(new URL(`./services/${name}/package.json`, import.meta.url)));
const refuse = (packages, dirs, message) => ({
  'no-restricted-imports': ['error', { patterns: [
    { regex: `^@everdict/(?:${packages.join('|')})(?:/|$)`, message },
    { regex: `^\\.\\.?/(?:.*/)?(?:${dirs.join('|')})(?:/|$)`, message },
  ] }],
});
const boundaries = [
  ...SERVICES.map((service) => {
    const others = [...SERVICES.filter((s) => s !== service), 'cli'];
    return { files: [`services/${service}/**`], rules: refuse(others, others, `No service imports another service or the CLI: what ${service} shares belongs in a lib under libs/.`) };
  }),
  { files: ['libs/**'], rules: refuse([...SERVICES, 'cli'], ['services', 'cli'], 'No lib imports a service or the CLI: services compose libs, never the reverse.') },
];

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/generated/**', '.data/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', URL: 'readonly', performance: 'readonly', fetch: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // Decision code is pure: no ambient clock or randomness (STYLE: injected Clock).
    files: ['libs/contracts/src/**/*.ts', 'libs/agent-runtime/src/**/*.ts'],
    rules: {
      'no-restricted-syntax': ['error',
        { selector: "CallExpression[callee.object.name='Date'][callee.property.name='now']", message: 'Use the injected Clock, not Date.now(), in decision code.' },
        { selector: "CallExpression[callee.object.name='Math'][callee.property.name='random']", message: 'No ambient randomness in decision code.' },
      ],
    },
  },
  {
    // The operator console (React, .tsx) runs in a browser and reaches the server only over the
    // public HTTP API: no workspace package is imported into it.
    files: ['console/**/*.ts', 'console/**/*.tsx'],
    languageOptions: { globals: { window: 'readonly', document: 'readonly', history: 'readonly', EventSource: 'readonly', MessageEvent: 'readonly', Event: 'readonly' } },
    rules: { 'no-restricted-imports': ['error', { patterns: [{ regex: '^@everdict/', message: 'The console talks only to the public HTTP API; it imports no Everdict package.' }] }] },
  },
  ...boundaries,
);
