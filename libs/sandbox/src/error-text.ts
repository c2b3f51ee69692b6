/** Causes followed below a failed fetch: its `fetch failed` holds the socket's error one level down. */
const CAUSES_MAX = 3;
/** Longest text an error contributes: an upstream's error body may be a whole HTML page. */
const TEXT_CHARS_MAX = 512;

/**
 * An error as one line of the runtime's log, for the operator: its message,
 * the HTTP status an upstream answered with (the SDK's message carries only
 * the body), and, for a failed fetch, its causes (`fetch failed: connect
 * ECONNREFUSED 127.0.0.1:1`): fetch reports every network failure as a
 * TypeError `fetch failed`, which says nothing of why. The causes of other
 * errors are left out: ours already explain (`no answer to initialize within
 * 30 s`), and what they wrap would add only noise. Each part cut at
 * TEXT_CHARS_MAX characters. Not for clients: it names addresses.
 */
export function errorText(error: unknown): string {
  const parts = [withStatus(error)];
  let cause = error instanceof TypeError ? error.cause : undefined;
  for (let depth = 0; depth < CAUSES_MAX && cause !== undefined && cause !== null; depth++) {
    parts.push(causeText(cause));
    cause = (cause as { cause?: unknown }).cause;
  }
  return parts.map((part) => part.slice(0, TEXT_CHARS_MAX)).join(': ');
}

function withStatus(error: unknown): string {
  const { status, statusText } = (error ?? {}) as { status?: unknown; statusText?: unknown };
  if (typeof status !== 'number') return String(error);
  const said = typeof statusText === 'string' && statusText !== '' ? ` ${statusText}` : '';
  return `the upstream answered HTTP ${status}${said}: ${String(error)}`;
}

/** A socket error of several addresses tried (an AggregateError) has no message of its own, only a code. */
function causeText(cause: unknown): string {
  if (!(cause instanceof Error)) return String(cause);
  if (cause.message !== '') return cause.message;
  return (cause as { code?: unknown }).code !== undefined ? String((cause as { code?: unknown }).code) : cause.name;
}
