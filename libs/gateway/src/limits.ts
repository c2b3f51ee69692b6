import type { IncomingMessage } from 'node:http';

/**
 * Counts in-flight requests per principal. Entries exist only while a
 * principal has requests in flight, and at most `principalsMax` of them:
 * past that, new principals are refused like an over-limit one.
 */
export class ConcurrencyLimiter {
  readonly #inFlight = new Map<string, number>();
  readonly #perPrincipalMax: number;
  readonly #principalsMax: number;

  constructor(perPrincipalMax: number, principalsMax: number) {
    this.#perPrincipalMax = perPrincipalMax;
    this.#principalsMax = principalsMax;
  }

  /**
   * Takes a slot for `principal`; false when over the limit. Each slot taken
   * is given back with exactly one `release`. (No release closure per slot:
   * a slot lasts as long as its request, an open stream's for hours.)
   */
  acquire(principal: string): boolean {
    const current = this.#inFlight.get(principal) ?? 0;
    if (current >= this.#perPrincipalMax) return false;
    if (current === 0 && this.#inFlight.size >= this.#principalsMax) return false;
    this.#inFlight.set(principal, current + 1);
    return true;
  }

  release(principal: string): void {
    const left = (this.#inFlight.get(principal) ?? 1) - 1;
    if (left <= 0) this.#inFlight.delete(principal);
    else this.#inFlight.set(principal, left);
  }

  get inFlight(): number {
    let total = 0;
    for (const n of this.#inFlight.values()) total += n;
    return total;
  }
}

/** Bytes of header names and values as received (rawHeaders keeps duplicates). */
export function headerBytes(req: IncomingMessage): number {
  let total = 0;
  for (const part of req.rawHeaders) total += part.length + 2;
  return total;
}
