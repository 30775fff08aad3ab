/**
 * The hash of a reviewed operation definition. A packet may pin it (`operation.templateHash`),
 * so a template edited after approval is refused instead of silently running different code.
 */
import { canonicalJson, sha256Hex } from '@everdict/contracts';

export function templateHash(connectorKind: string, definition: unknown): string {
  return `sha256:${sha256Hex(canonicalJson({ connectorKind, definition }))}`;
}
