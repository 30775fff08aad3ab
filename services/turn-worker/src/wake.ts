/**
 * A handler's wake: the task parked for a reason `cause` ends (contracts' PARK_CLASSES) becomes
 * open, and its task.runnable — with the reason that cause names — goes out in the same unit of
 * work. The caller has checked that the task waits for this very event (its park detail).
 */
import { WAKE_RUNNABLE } from '@everdict/contracts';
import type { WakeCause } from '@everdict/contracts';
import { wakeTask } from '@everdict/store';
import type { UnitOfWork } from '@everdict/store';
import { sendRunnable } from './envelopes.js';

/** True when the task was woken (false: it was not parked for a reason `cause` ends). */
export async function wake(uow: UnitOfWork, taskId: string, cause: WakeCause): Promise<boolean> {
  const woken = await wakeTask(uow, taskId, cause);
  if (woken) await sendRunnable(uow, woken, WAKE_RUNNABLE[cause], null);
  return woken !== undefined;
}
