/** Argument parsing for the CLI: a command word, then flags. `--json` is global. */
import { parseArgs } from 'node:util';

interface Invocation {
  command: string;
  positionals: string[];
  json: boolean;
  /** `--service NAME` (repeatable): which services `start` runs; none = all. */
  services: string[];
  /** `--grant-to ROLE`: `migrate` grants the services' role its row privileges afterwards. */
  grantTo: string | undefined;
}

export class UsageError extends Error {}

export function parseInvocation(argv: readonly string[]): Invocation {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
        service: { type: 'string', multiple: true },
        'grant-to': { type: 'string' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const [command = 'help', ...positionals] = parsed.positionals;
  return { command: parsed.values.help ? 'help' : command, positionals, json: parsed.values.json ?? false, services: parsed.values.service ?? [], grantTo: parsed.values['grant-to'] };
}
