/**
 * @everdict/reconciler — repairs what the other services leave in doubt (DESIGN §2; seed 004 §7,
 * §11.4): unknown effect outcomes through WhatLanded (never a blind retry), executions whose
 * coordinator died, expired task leases, stale outbox claims, parked-task timers, gate and
 * grant expiry. `everdict start` composes it with `startReconciler`.
 */
export * from './metrics.js';
export * from './whatLanded.js';
export * from './sweeps.js';
export * from './handler.js';
export * from './reconciler.js';
export * from './service.js';
export * from './env.js';
