/** Human-readable by default, one JSON document with --json. */
export function emit(json: boolean, value: unknown, human: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${human()}\n`);
}
