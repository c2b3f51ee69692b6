import type { z } from 'zod';

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: string };

/** Renders a zod issue path as `a.b[0].c`. */
function fieldName(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out === '' ? '(root)' : out;
}

/**
 * Validates untrusted input. Never throws; the error names the offending
 * field, e.g. `processId: must be 1-128 characters from [A-Za-z0-9._:@-]`,
 * for each of the first `issuesMax` issues (default 3).
 */
export function parseWith<S extends z.ZodType>(schema: S, input: unknown, issuesMax = 3): Parsed<z.output<S>> {
  const result = schema.safeParse(input);
  if (result.success) return { ok: true, value: result.data };
  const messages = result.error.issues.slice(0, issuesMax).map((issue) => {
    const keys = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
    return `${fieldName(issue.path)}: ${issue.message}${keys}`;
  });
  return { ok: false, error: messages.join('; ') };
}
