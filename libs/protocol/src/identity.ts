import { z } from 'zod';

/**
 * Header names of the identity contract (design brief §10). Lower case, as
 * Node presents incoming headers.
 *
 * `class` and `process` may come from clients. `sessionId` and `principal`
 * are set by the gateway only; the gateway strips them from client requests
 * so that no client can adopt a session id or pose as a principal.
 */
export const IDENTITY_HEADERS = {
  class: 'x-switchyard-class',
  process: 'x-switchyard-process',
  sessionId: 'x-switchyard-session-id',
  principal: 'x-switchyard-principal',
} as const;

/** Header carrying a runtime's self-description on `/api/runtime/connect`. */
export const RUNTIME_INFO_HEADER = 'x-runtime-info';

/**
 * Header carrying a runtime's tunnel liveness timing on `/api/runtime/connect`
 * (`ping-interval-ms=5000, ping-timeout-ms=5000`), so that its replica knows
 * how soon the runtime notices a connection gone silent.
 */
export const RUNTIME_LIVENESS_HEADER = 'x-runtime-liveness';

/**
 * Header carrying a runtime process's instance id on `/api/runtime/connect`: drawn at random when the
 * process starts and sent on every dial, so that a replica tells the same runtime dialling again from
 * another one with its id. Optional (runtimes of earlier releases send none); a header of its own, not
 * a field of `X-Runtime-Info`, which replicas of earlier releases validate strictly.
 */
export const RUNTIME_INSTANCE_HEADER = 'x-runtime-instance';

/** A runtime instance id: 16–64 characters from `[A-Za-z0-9_-]`. */
export const RUNTIME_INSTANCE_PATTERN = /^[A-Za-z0-9_-]{16,64}$/;

/** MCP session header (legacy protocol generation). */
export const MCP_SESSION_HEADER = 'mcp-session-id';

/** Class used when a request names none. */
export const DEFAULT_CLASS = 'default';

/** Longest identity value accepted, in characters. */
export const IDENTITY_VALUE_LENGTH_MAX = 128;

/** Identity values: 1–128 visible ASCII characters from `[A-Za-z0-9._:@-]`. */
export const IDENTITY_VALUE_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;

export const identityValueSchema = z
  .string()
  .max(IDENTITY_VALUE_LENGTH_MAX)
  .regex(IDENTITY_VALUE_PATTERN, 'must be 1-128 characters from [A-Za-z0-9._:@-]');

/** True when `value` is a well-formed identity value. */
export function isIdentityValue(value: unknown): value is string {
  return typeof value === 'string' && IDENTITY_VALUE_PATTERN.test(value);
}

/** The three parts that place a request: which sandbox kind, which sandbox, which session. */
export interface Identity {
  readonly class: string;
  readonly process: string;
  readonly thread: string;
}
