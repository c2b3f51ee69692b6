import { SwitchyardError } from '@switchyard/protocol';

/**
 * A config that cannot be used: unknown keys, bad values, an unreadable file.
 * `problems` lists each one; `message` renders them one per line so an
 * operator reads the whole list from a single failed start.
 */
export class ConfigError extends SwitchyardError {
  readonly problems: readonly string[];
  constructor(summary: string, problems: readonly string[], options?: { cause?: unknown }) {
    super('invalid_request', [`${summary}:`, ...problems.map((p) => `  - ${p}`)].join('\n'), options);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}
