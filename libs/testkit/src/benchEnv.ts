/** A benchmark's count setting from the environment: `dflt` when unset, else a positive integer, or it fails naming the variable. */
export function positiveEnv(name: string, dflt: number): number {
  const v = Number(process.env[name] ?? dflt);
  if (!Number.isSafeInteger(v) || v <= 0) throw new Error(`${name} must be a positive integer (got ${process.env[name]})`);
  return v;
}
