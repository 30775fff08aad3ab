/**
 * @everdict/llm — one `ModelClient` interface, three adapters (any OpenAI-compatible Chat
 * Completions endpoint, the Anthropic Messages API, a deterministic script), provider error
 * classification, and routes from config. Adapters make exactly one request per call; retries
 * are the runtime's decision.
 */
export * from './model.js';
export * from './errors.js';
export * from './openai.js';
export * from './anthropic.js';
export * from './scripted.js';
export * from './routes.js';
