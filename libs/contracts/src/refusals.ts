/**
 * Kernel refusal wording and tool-call outcomes (K8). A withheld call is not a successful one:
 * evidence of success comes from the kernel's tool_result event (`isError`, `outcome`), never
 * from reading result text. Where a transcript carries no attribution, match these exported
 * constants with `isKernelRefusal` instead of guessing from an "Error" prefix. The kernel owns
 * the wording; changing a constant changes both ends together.
 */
import type { CallStatus } from './states.js';

export const KERNEL_REFUSALS = {
  forbidden: 'Kernel refusal [forbidden]: the envelope forbids this tool; it was not run.',
  read_out_of_scope: 'Kernel refusal [read_out_of_scope]: this read is outside the envelope scope; it was not run.',
  write_out_of_scope: 'Kernel refusal [write_out_of_scope]: this write is outside the envelope scope; it was not run.',
  permission_denied: 'Kernel refusal [permission_denied]: the permission hook denied this call; it was not run.',
  consent_denied: 'Kernel refusal [consent_denied]: consent for this exact call was refused or not given; it was not run.',
  shadow_denied: 'Kernel refusal [shadow_denied]: this run is in shadow mode; the call was captured, not run.',
  unregistered_tool: 'Kernel refusal [unregistered_tool]: no tool with this name is registered; nothing was run.',
  invalid_arguments: 'Kernel refusal [invalid_arguments]: the arguments do not match the tool schema; nothing was run.',
  invalid_action_document: 'Kernel refusal [invalid_action_document]: the response is not a valid action document; nothing was run.',
  outcome_unknown: 'Kernel refusal [outcome_unknown]: an earlier attempt of this call has no recorded outcome; it is not run again until reconciled.',
} as const;

export type KernelRefusal = keyof typeof KERNEL_REFUSALS;
export const KERNEL_REFUSAL_CODES = Object.keys(KERNEL_REFUSALS) as KernelRefusal[];

/** The refusal text fed back to the model: the constant, then an optional detail. */
export function refusalText(code: KernelRefusal, detail?: string): string {
  return detail === undefined || detail === '' ? KERNEL_REFUSALS[code] : `${KERNEL_REFUSALS[code]} ${detail}`;
}

/** The refusal a transcript text carries, or null when it carries none of the kernel's constants. */
export function kernelRefusalCode(text: unknown): KernelRefusal | null {
  if (typeof text !== 'string') return null;
  return KERNEL_REFUSAL_CODES.find((code) => text.startsWith(KERNEL_REFUSALS[code])) ?? null;
}

export function isKernelRefusal(text: unknown): boolean {
  return kernelRefusalCode(text) !== null;
}

/**
 * What happened to one tool call. `ok` and `tool_error` mean the handler ran; every other
 * outcome means the kernel withheld the call.
 */
export const TOOL_OUTCOMES = ['ok', 'tool_error', 'refused', 'shadow_denied', 'invalid', 'unknown'] as const;
export type ToolOutcome = (typeof TOOL_OUTCOMES)[number];

export function outcomeIsError(outcome: ToolOutcome): boolean {
  return outcome !== 'ok';
}

/** The journal status (RUNTIME_CALLS.status) an outcome is recorded with. */
export function callStatusForOutcome(outcome: ToolOutcome): Exclude<CallStatus, 'intent'> {
  switch (outcome) {
    case 'ok':
      return 'completed';
    case 'tool_error':
      return 'failed';
    case 'refused':
    case 'invalid':
      return 'refused';
    case 'shadow_denied':
      return 'shadowed';
    case 'unknown':
      return 'unknown';
  }
}
