/**
 * Which of a turn's commits may skip waiting for the WAL flush (pure: no I/O).
 *
 * A turn commits C2 (the model's response and a batch of tool intents, before the tools run)
 * and C3 (outcomes, checkpoint, the next turn's intent, transition, outbox, ledger record;
 * turn.ts). C3 is always synchronous: its outbox is published to the broker and its transition
 * is acted on by other processes, outside this database. C2 may be committed with its
 * durability deferred (`synchronous_commit = off`, libs/store groupCommit.ts) when every call
 * whose intent it carries is one that nobody outside this process can observe:
 *   - an intrinsic cognition tool (todo, plan, spawn, read_tool_result, wait): children, plans
 *     and results become durable with C3, never before;
 *   - a call whose only effect is held by the host and written with C3 (`outcomeAtomic`, the
 *     proposal tool: its packet and gate request commit with the turn);
 *   - a first-party in-process read that sends no data out (`builtin` static/echo tools).
 * A connector read or an MCP tool (remote transport), a workspace tool and a read with external
 * egress keep C2 synchronous: their execution is observable by the estate or a third party, so
 * its intent is durable before it runs (seed 004 §2.1: every externally observable operation is
 * journalled separately). A call the registry does not know keeps it synchronous too.
 *
 * Why a deferred C2 keeps seed 004 §2's guarantees. Postgres commits it at once (visible to
 * every reader, surviving the worker's death: the crash matrix's after_response and
 * after_read_batch find it as before); only a crash of Postgres itself before the WAL reaches
 * disk can lose it. WAL is flushed in order, so the turn's next synchronous commit (its C3, or
 * any other transaction's) makes it durable, and a lost C2 is lost together with everything
 * after it: the database is exactly where the turn's C1 left it. The next worker then restores
 * the last checkpoint and finds the ordinal-0 intent open — the state of an after_model crash:
 * the model is asked again with the same request bytes, and the calls run again under new ids.
 * Nothing they did is lost: none of them changed anything outside this process, and nothing
 * was published or handed on before C3 (a result, a child, a proposal all commit with it).
 *
 * Folding. The same argument lets such a C2 not be written at all: when its batch may be
 * deferred and every tool outcome produced so far whose intent is in the journal is durable
 * (none is waiting for this write to become replay-safe), the batch's intents stay in the
 * worker's memory and are inserted already settled by the turn's next write — its C3, or the
 * synchronous C2 of a later batch that reaches outside the process. A crash before that write
 * leaves exactly the state a lost deferred C2 leaves (the after_model state above), and the
 * turn costs one synchronous commit after its model call instead of two.
 */
import type { ToolRegistry } from '@everdict/agent-runtime';

/** Whether a C2 carrying the intents of `toolNames` may commit with its durability deferred. */
export function mayDeferIntents(registry: Pick<ToolRegistry, 'descriptor'>, toolNames: readonly string[]): boolean {
  return toolNames.every((name) => {
    const d = registry.descriptor(name);
    if (d === undefined) return false;
    if (d.intrinsic === true || d.outcomeAtomic === true) return true;
    return d.access === 'read' && d.origin === 'first_party' && d.transport === 'in_process' && d.effects?.dataAccess?.egress !== 'external';
  });
}

/**
 * Whether a batch's intents may be folded into the turn's next write instead of committed now:
 * its C2 may be deferred (`deferrable`, mayDeferIntents) and no tool outcome of a call already in
 * the journal is waiting to be made durable by it (`unwrittenJournalledOutcomes`).
 */
export function mayFoldIntents(deferrable: boolean, unwrittenJournalledOutcomes: number): boolean {
  return deferrable && unwrittenJournalledOutcomes === 0;
}
