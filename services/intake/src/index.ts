/**
 * @everdict/intake — platform.intake (DESIGN §2, §7; seed 004 §11.6): the case HTTP API with
 * ownership enforced server-side, signed ticket webhooks and IMAP mailbox monitors, all opening
 * CASE + root TASK + task.runnable in one unit of work, deduplicated on the origin key.
 * `everdict start` composes it with `startIntake`.
 */
export * from './open.js';
export * from './api.js';
export * from './operatorControls.js';
export * from './views.js';
export * from './metrics.js';
export * from './mailboxes.js';
export * from './channels.js';
export * from './sources.js';
export * from './cron.js';
export * from './scheduler.js';
export * from './service.js';
export * from './ui.js';
export * from './env.js';
