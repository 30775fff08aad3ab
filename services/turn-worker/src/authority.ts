/**
 * The papers and grants part of a task's narrowed execution context (seed 004 §3: "every child
 * receives a narrower execution context: task objective, permitted paper references, current
 * grant subset, …; a child cannot widen its parent's authority"). Pure decisions.
 *
 * Papers an agent may read (through `read_tool_result`):
 *   - its OWN stored results (`results/<its task id>/<ref>`), always;
 *   - the papers its context permits (`permittedPapers`: full paper names), given by its parent.
 * Nothing else of the case — not another task's results, and never a transcript, request,
 * state or summary paper (§3: isolation is an explicit, allow-listed facade; a verifier does not
 * see the author's transcript). A root task's context permits nothing beyond its own results.
 *
 * Grants a task holds: at the root, the case type's initial grants; below, the subset its
 * parent passed on.
 *
 * Narrowing at spawn (K4 for papers and grants):
 *   - papers named → those the parent may read itself (its own results, its permitted papers);
 *     none named → the papers the parent was given (never the parent's own working results:
 *     handing those on is explicit);
 *   - grants named → those the parent holds; none named → none (authority is asked for).
 * What was asked and not held is withheld, and the placement records it.
 */

/** The papers and grants a task holds. */
interface PaperGrantAuthority {
  /** Full paper names the task may read besides its own results. */
  readonly permittedPapers: readonly string[];
  readonly grants: readonly string[];
}

const RESULT_REF_PREFIX = 'result:';

/** The paper a task's stored result (`result:<call id>`) lives in. */
function resultPaperName(taskId: string, ref: string): string {
  return `results/${taskId}/${ref}`;
}

/** Whether the ref (a bare `result:…` ref or a full paper name) names the paper `name`. */
export function refNames(ref: string, name: string): boolean {
  return name === ref || (ref.startsWith(RESULT_REF_PREFIX) && name.startsWith('results/') && name.endsWith(`/${ref}`));
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/**
 * What a task holds. `context` is its task row's context (null for a root); `rootGrants` the
 * case type's initial grants (used only for a root).
 */
export function heldAuthority(task: { readonly parent_id: string | null; readonly context: unknown }, rootGrants: readonly string[]): PaperGrantAuthority {
  if (task.parent_id === null) return { permittedPapers: [], grants: [...new Set(rootGrants)] };
  const c = (task.context ?? {}) as { permittedPapers?: unknown; grants?: unknown };
  return { permittedPapers: strings(c.permittedPapers), grants: strings(c.grants) };
}

/** A permitted paper `ref` names, if any (the own-results namespace aside). */
function permittedPaper(held: PaperGrantAuthority, ref: string): string | null {
  return held.permittedPapers.find((p) => refNames(ref, p)) ?? null;
}

interface Narrowed {
  readonly context: PaperGrantAuthority;
  /** Asked for and not held by the parent: withheld. */
  readonly withheld: { readonly papers: readonly string[]; readonly grants: readonly string[] };
}

/** The child's papers and grants: what the spawn asked ∩ what the parent holds (see the header). */
export function narrowForChild(parentTaskId: string, parent: PaperGrantAuthority, asked: { readonly papers?: readonly string[] | null; readonly grants?: readonly string[] | null }): Narrowed {
  const papers: string[] = [];
  const withheldPapers: string[] = [];
  if (asked.papers === undefined || asked.papers === null) {
    papers.push(...parent.permittedPapers);
  } else {
    for (const ref of asked.papers) {
      // A paper the parent was given, else one of the parent's own results (whose namespace is
      // its own: naming a result it never stored grants a paper that does not exist).
      const ownPrefix = `results/${parentTaskId}/`;
      const own = ref.startsWith(RESULT_REF_PREFIX) ? resultPaperName(parentTaskId, ref) : ref.startsWith(ownPrefix) && ref.length > ownPrefix.length ? ref : null;
      const name = permittedPaper(parent, ref) ?? own;
      if (name === null) withheldPapers.push(ref);
      else papers.push(name);
    }
  }
  const grants: string[] = [];
  const withheldGrants: string[] = [];
  for (const g of asked.grants ?? []) (parent.grants.includes(g) ? grants : withheldGrants).push(g);
  return {
    context: { permittedPapers: [...new Set(papers)].sort(), grants: [...new Set(grants)].sort() },
    withheld: { papers: [...new Set(withheldPapers)], grants: [...new Set(withheldGrants)] },
  };
}
