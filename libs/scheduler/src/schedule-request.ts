import {
  isIdentityValue,
  parseWith,
  scheduleRequestSchema,
  type Parsed,
  type ScheduleRequest,
} from '@switchyard/protocol';

/** Keys a body may carry and still take the fast path; anything else goes through the schema. */
const FAST_KEYS = new Set(['class', 'processId', 'threadId', 'sticky']);

/**
 * Validates a `POST /api/schedule` body exactly as `scheduleRequestSchema`
 * does. The common body — class, process, optional thread and sticky flag —
 * is checked by hand: the schema's parse was the largest single cost of a
 * schedule answer after the socket write. Every other shape, valid or not,
 * goes through the schema, so error messages and defaults stay the schema's.
 * A test holds both paths to the same answers.
 */
export function parseScheduleRequest(body: unknown): Parsed<ScheduleRequest> {
  return fastPath(body) ?? parseWith(scheduleRequestSchema, body);
}

function fastPath(body: unknown): Parsed<ScheduleRequest> | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  if (Object.getPrototypeOf(body) !== Object.prototype) return undefined;
  const input = body as Record<string, unknown>;
  for (const key in input) if (!FAST_KEYS.has(key)) return undefined;
  const { class: cls, processId, threadId, sticky } = input;
  if (!isIdentityValue(cls) || !isIdentityValue(processId)) return undefined;
  if ('threadId' in input && !isIdentityValue(threadId)) return undefined;
  if ('sticky' in input && typeof sticky !== 'boolean') return undefined;
  const value: ScheduleRequest = {
    class: cls,
    processId,
    ...(threadId === undefined ? {} : { threadId: threadId as string }),
    sticky: (sticky as boolean | undefined) ?? true,
  };
  return { ok: true, value };
}
