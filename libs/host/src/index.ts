export * from './substrate.js';
export * from './embedded.js';
