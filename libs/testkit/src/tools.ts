/**
 * System tools that integration tests drive for real (promtool, dovecot), from Debian packages
 * `.ci/run` installs. A test that needs one FAILS when it is missing, with or without CI set: a
 * passing run always means the check ran, never that it was skipped.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

interface ToolSpec {
  /** The Debian package that ships it, named in the failure. */
  readonly debianPackage: string;
  /** An environment variable that, when set, is the tool's path (and nothing else is tried). */
  readonly envVar?: string;
  /** Folders searched after PATH (daemons live in sbin, which a user's PATH may lack). Default: none. */
  readonly extraDirs?: readonly string[];
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The tool's path, or an Error saying how to install it. */
export function requireTool(name: string, spec: ToolSpec): string {
  const override = spec.envVar ? process.env[spec.envVar] : undefined;
  if (override) {
    if (executable(override)) return override;
    throw new Error(`${spec.envVar}=${override} is not an executable ${name}`);
  }
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), ...(spec.extraDirs ?? [])];
  const found = dirs.map((d) => join(d, name)).find(executable);
  if (found) return found;
  throw new Error(`${name} is not installed (searched PATH${spec.extraDirs?.length ? ` and ${spec.extraDirs.join(', ')}` : ''}): install Debian's ${spec.debianPackage} (apt-get install -y ${spec.debianPackage}; .ci/run does)`);
}

const promtoolBinary = (): string => requireTool('promtool', { debianPackage: 'prometheus', envVar: 'PROMTOOL' });

/** Runs promtool (which must be installed); its exit status and combined output. */
export function promtool(args: readonly string[], opts: { input?: string; cwd?: string } = {}): { status: number | null; output: string } {
  const r = spawnSync(promtoolBinary(), args, { cwd: opts.cwd, input: opts.input, encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw r.error;
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}
