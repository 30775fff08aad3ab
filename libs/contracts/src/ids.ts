/**
 * Identifier allocation. Message, call and record ids are UUIDv7 (time-ordered, so indexes
 * stay append-friendly), always allocated by the runtime before dispatch (§2.1).
 */
import { v7 as uuidv7, validate as uuidValidate } from 'uuid';

export function newId(): string {
  return uuidv7();
}

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && uuidValidate(value);
}
