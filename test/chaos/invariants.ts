// Cluster-wide invariants sampled while chaos runs:
// * one epoch number, one content — every replica that keeps epoch N serves
//   the same snapshot for it (GET /api/epoch/:id/snapshot, compared in a
//   canonical form, across replicas and across time);
// * per replica, term and epoch never go down (a replica that accepted a
//   commit of a lower term would show it).
import { createHash } from 'node:crypto';

const CANON_KEYS_MAX = 10_000;

/** JSON with object keys sorted and the unordered arrays of a snapshot sorted, so equal content hashes equal. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) {
    const items = value.map(canonical);
    return items.every((v) => typeof v !== 'object' || v === null)
      ? [...items].sort()
      : [...items].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

export function contentHash(snapshot: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(canonical(snapshot)))
    .digest('hex')
    .slice(0, 16);
}

interface EpochInfo {
  readonly replica: string;
  readonly epoch: number | null;
  readonly term: number;
  readonly isLeader: boolean;
}

async function getJson<T>(url: string): Promise<T | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1000) });
    if (res.status !== 200) {
      await res.body?.cancel();
      return undefined;
    }
    return (await res.json()) as T;
  } catch {
    return undefined;
  }
}

/**
 * Samples every replica every `intervalMs` until stopped: records
 * (term, epoch) per replica and the snapshot hash of each replica's latest
 * epoch (and the one before) from every replica that keeps it. The epoch →
 * hash table and the violation list are bounded.
 */
export class InvariantSampler {
  readonly violations: string[] = [];
  /** Epoch → first content hash seen, with who served it. */
  readonly hashes = new Map<number, { hash: string; replica: string }>();
  readonly #last = new Map<string, { term: number; epoch: number }>();
  readonly #urls: () => string[];
  #stopped = false;
  #loop: Promise<void> | undefined;
  samples = 0;
  comparisons = 0;

  constructor(urls: () => string[]) {
    this.#urls = urls;
  }

  start(intervalMs = 200): void {
    this.#loop = (async () => {
      while (!this.#stopped) {
        await this.#sample();
        await new Promise((resolve) => setTimeout(resolve, intervalMs));
      }
    })();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
  }

  #violate(message: string): void {
    if (this.violations.length < 100) this.violations.push(message);
  }

  async #sample(): Promise<void> {
    const urls = this.#urls();
    const infos = await Promise.all(urls.map((u) => getJson<EpochInfo>(`${u}/api/epoch`)));
    const epochs = new Set<number>();
    for (const info of infos) {
      if (!info || info.epoch === null) continue;
      this.samples++;
      const prev = this.#last.get(info.replica);
      if (
        prev &&
        (info.term < prev.term || (info.term === prev.term && info.epoch < prev.epoch) || info.epoch < prev.epoch)
      ) {
        this.#violate(`${info.replica}: term/epoch went from ${prev.term}/${prev.epoch} to ${info.term}/${info.epoch}`);
      }
      this.#last.set(info.replica, { term: info.term, epoch: info.epoch });
      epochs.add(info.epoch);
      if (info.epoch > 0) epochs.add(info.epoch - 1);
    }
    for (const epoch of epochs) {
      const snaps = await Promise.all(
        urls.map(async (u, i) => ({
          replica: infos[i]?.replica ?? u,
          body: await getJson<{ epoch: number; runtimes: unknown }>(`${u}/api/epoch/${epoch}/snapshot`),
        })),
      );
      for (const { replica, body } of snaps) {
        if (!body) continue;
        const hash = contentHash(body.runtimes);
        const seen = this.hashes.get(epoch);
        this.comparisons++;
        if (!seen) {
          this.hashes.set(epoch, { hash, replica });
          if (this.hashes.size > CANON_KEYS_MAX) this.hashes.delete(this.hashes.keys().next().value!);
        } else if (seen.hash !== hash) {
          this.#violate(`epoch ${epoch}: ${replica} serves content ${hash}, ${seen.replica} served ${seen.hash}`);
        }
      }
    }
  }
}
