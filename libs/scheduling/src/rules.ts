import { VERSION_RULE_KEY } from '@switchyard/protocol';
import type { Rule, Runtime } from '@switchyard/protocol';
import semver from 'semver';
import type { SemVer } from 'semver';
import type { Candidate } from './candidate.ts';

/** The value a rule key names: metadata, except the reserved `version` key. */
export function ruleValue(runtime: Runtime, key: string): string | undefined {
  if (key === VERSION_RULE_KEY) return runtime.version;
  return Object.hasOwn(runtime.metadata, key) ? runtime.metadata[key] : undefined;
}

/**
 * `equal`, `not_equal` and `exists` on one runtime. A missing key fails
 * `equal` and `exists` and passes `not_equal` (as Kubernetes' NotIn does).
 * `latest_version` compares across candidates, so it is not decided here.
 */
export function matchesRule(runtime: Runtime, rule: Rule): boolean {
  const value = ruleValue(runtime, rule.key);
  switch (rule.op) {
    case 'equal':
      return value !== undefined && value === rule.value;
    case 'not_equal':
      return value !== rule.value;
    case 'exists':
      return value !== undefined;
    case 'latest_version':
      return true;
  }
}

// Versions repeat across a fleet, and parsing is the costly part of
// latest_version; the cache is cleared whole when full (bounded, and the
// answer never depends on what is cached).
const PARSED_MAX = 4096;
const parsed = new Map<string, SemVer | null>();

function parseVersion(value: string): SemVer | null {
  let version = parsed.get(value);
  if (version === undefined) {
    if (parsed.size >= PARSED_MAX) parsed.clear();
    version = semver.parse(value);
    parsed.set(value, version);
  }
  return version;
}

/**
 * Keeps the candidates whose `key` holds the highest valid semver among
 * them (prereleases rank below their release, build metadata is ignored).
 * Values that are missing or not valid semver are dropped.
 */
export function latestVersion(candidates: readonly Candidate[], key: string): Candidate[] {
  let best: SemVer | null = null;
  let kept: Candidate[] = [];
  for (const candidate of candidates) {
    const raw = ruleValue(candidate.runtime, key);
    const version = raw === undefined ? null : parseVersion(raw);
    if (version === null) continue;
    const order = best === null ? 1 : version.compare(best);
    if (order > 0) {
      best = version;
      kept = [candidate];
    } else if (order === 0) kept.push(candidate);
  }
  return kept;
}

/** Outcome of AND-ing rules: the survivors, and the rule that emptied the set if one did. */
export interface RulesOutcome {
  readonly candidates: readonly Candidate[];
  readonly failed?: Rule;
}

/**
 * Applies rules AND-ed. Per-runtime rules run first and `latest_version`
 * rules after them, in their given order, so "the latest among those that
 * match the other rules" is what a mixed list means, whatever its order.
 */
export function applyRules(candidates: readonly Candidate[], rules: readonly Rule[]): RulesOutcome {
  let current = candidates;
  for (const rule of rules) {
    if (rule.op === 'latest_version') continue;
    current = current.filter((c) => matchesRule(c.runtime, rule));
    if (current.length === 0) return { candidates: current, failed: rule };
  }
  for (const rule of rules) {
    if (rule.op !== 'latest_version') continue;
    current = latestVersion(current, rule.key);
    if (current.length === 0) return { candidates: current, failed: rule };
  }
  return { candidates: current };
}

export function describeRule(rule: Rule): string {
  return rule.value === undefined ? `${rule.key} ${rule.op}` : `${rule.key} ${rule.op} ${JSON.stringify(rule.value)}`;
}
