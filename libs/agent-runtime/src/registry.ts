/**
 * The ToolRegistry a run sees: the host's base tools merged with the kernel's intrinsic
 * cognition tools. The merge is the ONLY place `intrinsic(...)` is applied (K2): a base tool
 * can never arrive intrinsic, claim the kernel origin, or shadow an intrinsic name.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import {
  EverdictError,
  INTRINSIC_TOOL_NAMES,
  intrinsic,
  isIntrinsic,
  validateToolDescriptor,
  type IntrinsicToolName,
  type ToolDescriptor,
} from '@everdict/contracts';
import { INTRINSIC_DESCRIPTORS } from './intrinsic-descriptors.js';

export interface ToolInvocation {
  readonly taskId: string;
  readonly turn: number;
  /** The journal's call id (allocated before dispatch). */
  readonly callId: string;
  readonly signal?: AbortSignal;
}

export interface ToolOutput {
  readonly content: string;
  /** The handler's own verdict that the call failed. */
  readonly isError?: boolean;
}

/** A base tool: a declared descriptor and the handler it describes. */
export interface Tool {
  readonly descriptor: ToolDescriptor;
  invoke(args: Readonly<Record<string, unknown>>, ctx: ToolInvocation): Promise<ToolOutput>;
}

export interface ToolRegistry {
  /** Every tool the model may name, in a stable order (base tools, then intrinsic). */
  readonly descriptors: readonly ToolDescriptor[];
  descriptor(name: string): ToolDescriptor | undefined;
  /** The handler of a base tool; intrinsic tools are dispatched by the kernel itself. */
  handler(name: string): Tool | undefined;
  /** Problems with `args` for this tool (empty when valid, or when its server validates). */
  argumentProblems(name: string, args: unknown): string[];
  /** The base tools (for building a child registry). */
  readonly baseTools: readonly Tool[];
}

// Tool schemas are third-party JSON Schema of many dialects: compile leniently, but fail the
// registry (not the call) when a kernel-validated schema cannot be compiled at all. Validators
// are memoised per schema object and dropped from Ajv's own cache, so building a registry per
// turn or per child does not grow memory or recompile.
const ajv = new Ajv2020({ allErrors: true, strict: false, validateSchema: false });
const compiled = new WeakMap<object, ValidateFunction>();

function compileArguments(d: ToolDescriptor): ValidateFunction | null {
  if (d.argumentValidation !== 'kernel') return null;
  const memo = compiled.get(d.inputSchema);
  if (memo !== undefined) return memo;
  const { $schema: _dialect, $id: _id, ...schema } = d.inputSchema as Record<string, unknown>;
  try {
    const validate = ajv.compile(schema);
    ajv.removeSchema(schema);
    compiled.set(d.inputSchema, validate);
    return validate;
  } catch (err) {
    throw new EverdictError('invalid_tool_descriptor', `tool descriptor inputSchema of ${d.name} does not compile`, { cause: err, details: { field: 'inputSchema', tool: d.name } });
  }
}

interface RegistryOptions {
  /** Which intrinsic tools to merge. Default: all five. */
  readonly intrinsics?: readonly IntrinsicToolName[];
}

export function kernelRegistry(baseTools: readonly Tool[], opts: RegistryOptions = {}): ToolRegistry {
  const byName = new Map<string, { descriptor: ToolDescriptor; tool?: Tool; validate: ValidateFunction | null }>();
  for (const tool of baseTools) {
    const d = validateToolDescriptor(tool.descriptor);
    if (d.origin === 'kernel' || d.intrinsic !== undefined || isIntrinsic(d)) {
      throw new EverdictError('not_intrinsic', `base tool ${d.name} claims to be kernel cognition; only the registry merge marks intrinsic tools`, { details: { field: 'origin', tool: d.name } });
    }
    if ((INTRINSIC_TOOL_NAMES as readonly string[]).includes(d.name)) {
      throw new EverdictError('tool_name_taken', `base tool ${d.name} would shadow the intrinsic tool of that name`, { details: { field: 'name', tool: d.name } });
    }
    if (byName.has(d.name)) throw new EverdictError('tool_name_taken', `two base tools are named ${d.name}`, { details: { field: 'name', tool: d.name } });
    byName.set(d.name, { descriptor: d, tool, validate: compileArguments(d) });
  }
  for (const name of opts.intrinsics ?? INTRINSIC_TOOL_NAMES) {
    const d = intrinsic(INTRINSIC_DESCRIPTORS[name]);
    byName.set(d.name, { descriptor: d, validate: compileArguments(d) });
  }
  const descriptors = [...byName.values()].map((e) => e.descriptor);
  return {
    descriptors,
    baseTools: [...baseTools],
    descriptor: (name) => byName.get(name)?.descriptor,
    handler: (name) => byName.get(name)?.tool,
    argumentProblems(name, args) {
      const entry = byName.get(name);
      if (entry === undefined) return [`tool ${name} is not registered`];
      if (args === null || typeof args !== 'object' || Array.isArray(args)) return ['arguments must be a JSON object'];
      if (entry.validate === null || entry.validate(args)) return [];
      return (entry.validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? e.keyword}`);
    },
  };
}
