#!/usr/bin/env node
// The `everdict` command. Runs the compiled CLI (npm run build / npm start build it first).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = fileURLToPath(new URL('../cli/dist/src/main.js', import.meta.url));
if (!existsSync(entry)) {
  console.error('everdict: not built yet; run `npm run build` (npm start builds automatically)');
  process.exit(2);
}
await import(entry);
