// The parser alone (semver documents loading single functions): every process
// that speaks the protocol loads this file, the gateway too, which never
// checks a version, and the whole API is about 47 modules to its 7.
import parse from 'semver/functions/parse.js';

/** Why a runtime version was refused: the one rule, stated where it is checked. */
export const RUNTIME_VERSION_MESSAGE =
  'must be a semantic version such as 1.4.2 or 2.0.0-rc.1: latest_version rules rank no other, and skip a runtime without one';

/**
 * True when `value` is a version `latest_version` rules can rank: exactly
 * what the scheduling core's `semver.parse` takes (SemVer 2.0.0, an optional
 * leading `v`). A runtime with any other version would be left out of every
 * such rule without a word, so it is refused where it is declared.
 */
export function isRuntimeVersion(value: string): boolean {
  return parse(value) !== null;
}
