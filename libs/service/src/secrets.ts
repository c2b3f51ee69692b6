import { readFileSync, statSync } from 'node:fs';

/**
 * Secrets given inline and/or as a file of one value per line (a mounted
 * Kubernetes Secret). The file is re-read when its modification time
 * changes, so rotating a Secret needs no restart; it is looked at no more
 * often than every `recheckMs` (default 1 s), since callers ask on every
 * request or connection. Blank lines and `#` comments are ignored, and so
 * are lines shorter than `lengthMin` (default 1), which `onShort` hears of
 * once per change of the file (its path and how many, never the values):
 * the file is held to the length a schema holds the inline values to.
 * Lines kept though shorter than `lengthAdvised` (where a length rule
 * came after deployments that may run with shorter values) are told to
 * `onShortKept` the same way. A file that cannot be read yields the inline
 * values only; the caller
 * decides whether an empty list is fatal. The list keeps its identity until
 * the file changes, so a caller may derive things from it once per change.
 */
export function secretSource(
  inline: readonly string[],
  file: string | undefined,
  options: {
    readonly recheckMs?: number;
    /** Milliseconds from any origin, only moving forward (default `performance.now`): recheckMs is a duration. */
    readonly now?: () => number;
    readonly lengthMin?: number;
    readonly onShort?: (file: string, count: number) => void;
    readonly lengthAdvised?: number;
    readonly onShortKept?: (file: string, count: number) => void;
  } = {},
): () => readonly string[] {
  if (file === undefined) return () => inline;
  const recheckMs = options.recheckMs ?? 1000;
  const now = options.now ?? (() => performance.now());
  const lengthMin = options.lengthMin ?? 1;
  const lengthAdvised = options.lengthAdvised ?? 0;
  let cached: readonly string[] = inline;
  let seenMtimeMs = -1;
  let checkedAt = -Infinity;
  return () => {
    if (now() - checkedAt < recheckMs) return cached;
    checkedAt = now();
    let short = 0;
    let shortKept = 0;
    try {
      const mtimeMs = statSync(file).mtimeMs;
      if (mtimeMs !== seenMtimeMs) {
        const lines = readFileSync(file, 'utf8')
          .split('\n')
          .map((line) => line.trim())
          .filter((line) => line !== '' && !line.startsWith('#'));
        const kept = lines.filter((line) => line.length >= lengthMin);
        cached = [...inline, ...kept];
        seenMtimeMs = mtimeMs;
        short = lines.length - kept.length;
        shortKept = kept.filter((line) => line.length < lengthAdvised).length;
      }
    } catch {
      cached = inline;
      seenMtimeMs = -1;
    }
    if (short > 0) options.onShort?.(file, short);
    if (shortKept > 0) options.onShortKept?.(file, shortKept);
    return cached;
  };
}
