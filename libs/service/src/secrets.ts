import { readFileSync, statSync } from 'node:fs';

/**
 * Secrets given inline and/or as a file of one value per line (a mounted
 * Kubernetes Secret). The file is re-read when its modification time
 * changes, so rotating a Secret needs no restart. Blank lines and `#`
 * comments are ignored. A file that cannot be read yields the inline values
 * only; the caller decides whether an empty list is fatal.
 */
export function secretSource(inline: readonly string[], file: string | undefined): () => readonly string[] {
  let cached: readonly string[] = inline;
  let seenMtimeMs = -1;
  return () => {
    if (file === undefined) return inline;
    try {
      const mtimeMs = statSync(file).mtimeMs;
      if (mtimeMs !== seenMtimeMs) {
        const lines = readFileSync(file, 'utf8')
          .split('\n')
          .map((line) => line.trim())
          .filter((line) => line !== '' && !line.startsWith('#'));
        cached = [...inline, ...lines];
        seenMtimeMs = mtimeMs;
      }
    } catch {
      cached = inline;
      seenMtimeMs = -1;
    }
    return cached;
  };
}
