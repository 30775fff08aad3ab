export * from './substrate.js';
