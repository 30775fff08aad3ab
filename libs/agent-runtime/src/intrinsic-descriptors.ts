/**
 * Descriptors of the kernel's cognition tools (K2). They are part of how the agent thinks:
 * each touches only the run's own working state (its todo list, its plan draft, its own
 * children bound by the same envelope, its own offloaded results, its own suspension), never
 * the workspace — hence declared `read`. Marked intrinsic only at registry merge.
 */
import type { IntrinsicToolName, ToolDescriptor } from '@everdict/contracts';

const kernelTool = (name: IntrinsicToolName, description: string, inputSchema: Record<string, unknown>): ToolDescriptor => ({
  name,
  description,
  inputSchema,
  access: 'read',
  origin: 'kernel',
  transport: 'in_process',
  argumentValidation: 'kernel',
});

const str = { type: 'string', minLength: 1, maxLength: 4000 };

export const INTRINSIC_DESCRIPTORS: Readonly<Record<IntrinsicToolName, ToolDescriptor>> = {
  todo: kernelTool('todo', 'Replace your todo list. Send the whole list every time.', {
    type: 'object',
    additionalProperties: false,
    required: ['items'],
    properties: {
      items: {
        type: 'array',
        maxItems: 100,
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['id', 'text', 'status'],
          properties: { id: { type: 'string', minLength: 1, maxLength: 64 }, text: str, status: { enum: ['pending', 'in_progress', 'done'] } },
        },
      },
    },
  }),
  plan: kernelTool('plan', "Draft or revise your plan: steps with stable ids and their dependencies. Each call records a new immutable revision that operators see in the case view. A sub-agent's revision is confirmed when it reaches its parent in order (the parent is told); a root's revision is recorded, not confirmed. Confirmation only orders work: it never approves an effect (writes still need their gate). You cannot mark a step done: the platform projects a step done only after its effect's assertion passed.", {
    type: 'object',
    additionalProperties: false,
    required: ['steps'],
    properties: {
      steps: {
        type: 'array',
        minItems: 1,
        maxItems: 100,
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['id', 'title'],
          properties: { id: { type: 'string', pattern: '^[A-Za-z0-9_.-]{1,64}$' }, title: str, dependsOn: { type: 'array', items: { type: 'string' } } },
        },
      },
      note: str,
    },
  }),
  spawn: kernelTool('spawn', "Start a sub-agent on an objective. It gets at most your read-only tools within your scope, and your authority, never more.", {
    type: 'object',
    additionalProperties: false,
    required: ['objective'],
    properties: {
      objective: str,
      tools: { type: 'array', maxItems: 100, items: { type: 'string', minLength: 1, maxLength: 64 }, description: 'Subset of your tools the sub-agent needs; default all it may have.' },
      papers: {
        type: 'array',
        maxItems: 50,
        items: { type: 'string', minLength: 1, maxLength: 256 },
        description: 'Stored results (refs such as result:...) the sub-agent may read; only ones you may read yourself. Default: the papers you were given, none of your own.',
      },
      grants: { type: 'array', maxItems: 50, items: { type: 'string', minLength: 1, maxLength: 128 }, description: 'Grants the sub-agent needs; only ones you hold. Default: none.' },
    },
  }),
  read_tool_result: kernelTool('read_tool_result', 'Read a page of a large tool result that was stored instead of shown in full.', {
    type: 'object',
    additionalProperties: false,
    required: ['ref'],
    properties: { ref: { type: 'string', minLength: 1, maxLength: 256 }, offset: { type: 'integer', minimum: 0 }, limit: { type: 'integer', minimum: 1, maximum: 100000 } },
  }),
  wait: kernelTool('wait', 'Stop until something outside this run happens: your question is answered (by your parent, or a human at the root), or your sub-agents report. `answers` answers questions your sub-agents asked you.', {
    type: 'object',
    additionalProperties: false,
    required: ['for', 'reason'],
    properties: {
      for: { enum: ['question', 'children'] },
      reason: str,
      question: {
        type: 'object',
        additionalProperties: false,
        required: ['gap', 'checked', 'dependsOn', 'alternatives', 'decisionNeeded'],
        properties: { gap: str, checked: str, dependsOn: str, alternatives: { type: 'array', items: str }, decisionNeeded: str },
      },
      answers: {
        type: 'array',
        maxItems: 20,
        description: 'Answers to questions your sub-agents asked you, by question id.',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['questionId', 'answer'],
          properties: { questionId: { type: 'string', pattern: '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' }, answer: { type: 'string', minLength: 1, maxLength: 16000 } },
        },
      },
    },
  }),
};
