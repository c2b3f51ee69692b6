import { z } from 'zod';

/** One thing wrong with a map: where (a key, or the map itself) and what. */
export interface MapProblem {
  readonly path: readonly string[];
  readonly message: string;
}

export interface MapRules {
  readonly entriesMax: number;
  /** What the entries are called in the message, e.g. `entries`, `dimensions`. */
  readonly entries: string;
  readonly keyPattern: RegExp;
  readonly keyMessage: string;
  /** What is wrong with one value, or undefined. */
  readonly valueProblem: (value: unknown) => string | undefined;
}

/** Why a map's own `__proto__` key is refused (JSON and YAML make one; zod leaves it out of a record unseen). */
export const PROTO_KEY_MESSAGE =
  "'__proto__' cannot be a key: JavaScript objects take it for their prototype, so it would be dropped";

/**
 * Up to `problemsMax` problems of `value` as a string-keyed map under
 * `rules`. The number of keys is checked before any key is read.
 */
export function mapProblems(value: unknown, rules: MapRules, problemsMax = Infinity): MapProblem[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return [{ path: [], message: 'expected an object' }];
  }
  const keys = Object.keys(value);
  if (keys.length > rules.entriesMax) return [{ path: [], message: `at most ${rules.entriesMax} ${rules.entries}` }];
  const problems: MapProblem[] = [];
  for (const key of keys) {
    if (problems.length >= problemsMax) break;
    // An own `__proto__` (JSON.parse makes one) would be lost, or worse, on the first copy by assignment.
    // It has a message of its own: it may well match the key pattern, so that one would not say why.
    if (key === '__proto__') problems.push({ path: [key], message: PROTO_KEY_MESSAGE });
    else if (!rules.keyPattern.test(key)) problems.push({ path: [key], message: rules.keyMessage });
    else {
      const problem = rules.valueProblem((value as Record<string, unknown>)[key]);
      if (problem !== undefined) problems.push({ path: [key], message: problem });
    }
  }
  return problems;
}

/**
 * A string-keyed map checked by `rules`, refused at its first problem with
 * that one issue. Why not `z.record(key, value).refine(count)`: zod checks,
 * and reports, every key and value before the count, about 1 KB and 5 µs per
 * bad key (300,000 bad keys, 6 MB of JSON: 318 MB and 1.6 s), so one
 * oversized map in a /watch event could run a scheduler out of memory.
 */
export function mapOf<V>(rules: MapRules) {
  return z.unknown().transform((value, ctx): Record<string, V> => {
    const [problem] = mapProblems(value, rules, 1);
    if (problem) {
      ctx.addIssue({ code: 'custom', message: problem.message, path: [...problem.path] });
      return z.NEVER;
    }
    return { ...(value as Record<string, V>) };
  });
}
