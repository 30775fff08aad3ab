export { parseInvocation, UsageError } from './args.js';
export { runMigrate } from './migrate.js';
