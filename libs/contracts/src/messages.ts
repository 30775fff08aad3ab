/**
 * The message type registry: every `type` the fleet understands, its supported payload schema
 * versions and their compiled validators. Derived from schemas/payloads/<type>.v<N>.schema.json
 * through the generated file table; a type or version absent here is rejected, never guessed.
 */
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { LatestPayloadVersion, MessageEnvelope, PayloadSchemaMap } from './generated/index.js';
import { PAYLOAD_SCHEMA_FILES } from './generated/index.js';
import { SCHEMA_ID_BASE, schemaValidator } from './schema-registry.js';

export type MessageType = keyof PayloadSchemaMap;
/** Supported payload versions of a message type. */
export type VersionOf<T extends MessageType> = keyof PayloadSchemaMap[T] & number;
/** The newest payload version of a type: what a sender builds unless it pins another. */
export type CurrentVersion<T extends MessageType> = LatestPayloadVersion[T] & VersionOf<T>;
/** The payload type of a message type and version, e.g. `PayloadOf<'task.runnable'>`. */
export type PayloadOf<T extends MessageType, V extends VersionOf<T> = CurrentVersion<T>> = PayloadSchemaMap[T][V];

/** An envelope whose type, version and payload are known to belong together. */
export type Envelope<T extends MessageType, V extends VersionOf<T> = CurrentVersion<T>> = Omit<MessageEnvelope, 'type' | 'version' | 'payload'> & {
  type: T;
  version: V;
  payload: PayloadOf<T, V>;
};

/** Any valid envelope, discriminated by `type` (and `version`), as decodeMessage returns it. */
export type AnyEnvelope = { [T in MessageType]: { [V in VersionOf<T>]: Envelope<T, V> }[VersionOf<T>] }[MessageType];

/** One supported (type, version) pair and its compiled payload validator. */
interface PayloadContract {
  readonly type: MessageType;
  readonly version: number;
  /** Path relative to schemas/. */
  readonly schemaFile: string;
  readonly schemaId: string;
  readonly validate: ValidateFunction;
}

type MessageTypeRegistry = { readonly [T in MessageType]: { readonly [V in VersionOf<T>]: PayloadContract } };

function buildRegistry(): MessageTypeRegistry {
  const registry: Record<string, Record<number, PayloadContract>> = {};
  for (const [type, versions] of Object.entries(PAYLOAD_SCHEMA_FILES)) {
    const byVersion: Record<number, PayloadContract> = {};
    for (const [version, schemaFile] of Object.entries(versions)) {
      byVersion[Number(version)] = Object.freeze({
        type: type as MessageType,
        version: Number(version),
        schemaFile,
        schemaId: SCHEMA_ID_BASE + schemaFile,
        validate: schemaValidator(schemaFile),
      });
    }
    registry[type] = Object.freeze(byVersion);
  }
  return Object.freeze(registry) as unknown as MessageTypeRegistry;
}

/** type → version → contract, compiled once at module load. */
export const MESSAGE_TYPES: MessageTypeRegistry = buildRegistry();

/** Every registered message type, sorted. */
export const MESSAGE_TYPE_NAMES: readonly MessageType[] = Object.freeze(Object.keys(MESSAGE_TYPES).sort() as MessageType[]);

export function isMessageType(value: unknown): value is MessageType {
  // Own keys only: "constructor" or "__proto__" must never look like a registered type.
  return typeof value === 'string' && Object.hasOwn(MESSAGE_TYPES, value);
}

/** Supported payload versions of a type, ascending. */
export function supportedVersions(type: MessageType): readonly number[] {
  return Object.keys(MESSAGE_TYPES[type])
    .map(Number)
    .sort((a, b) => a - b);
}

/** The contract of a (type, version) pair, or undefined when either is unknown. */
export function payloadContract(type: string, version: number): PayloadContract | undefined {
  if (!isMessageType(type)) return undefined;
  const versions: Readonly<Record<number, PayloadContract>> = MESSAGE_TYPES[type];
  return Object.hasOwn(versions, version) ? versions[version] : undefined;
}
