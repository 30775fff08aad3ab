export { parseInvocation, UsageError } from './args.js';
export { runMigrate } from './migrate.js';
export { FLEET_SERVICES, planNode, runStart } from './start.js';
export { selectServices } from './node/plan.js';
