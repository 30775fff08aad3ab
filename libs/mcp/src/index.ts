/**
 * @everdict/mcp — MCP servers' tools as kernel tools (stdio and streamable HTTP, official SDK),
 * with access and effects declared by the rules in classify.ts (K3, K6).
 */
export * from './classify.js';
export * from './bridge.js';
