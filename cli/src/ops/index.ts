export { OPS_COMMANDS, OPS_HELP, isOpsCommand, runOps } from './commands.js';
export type { OpsCommand } from './commands.js';
export { ApiError, apiTarget, request } from './client.js';
export * from './format.js';
