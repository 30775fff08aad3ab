export { OPS_HELP, isOpsCommand, runOps } from './commands.js';
export * from './format.js';
