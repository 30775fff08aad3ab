export { parseInvocation, UsageError } from './args.js';
export { runMigrate } from './migrate.js';
export { FLEET_SERVICES, runStart, selectServices } from './start.js';
