// The classes `switchyard runtime join --config <file>` serves: those of a
// runtime config file, read and checked by the runtime app's own loader, so
// a file is taken or refused by join as by the app, with the same words.
import type { EngineConfig } from '@switchyard/sandbox';
import { ConfigError } from '@switchyard/service';
import { classesOfFile } from '@switchyard/runtime-app/internal';

/** The classes of a config file, and the other keys it sets, which join does not take. */
export interface JoinConfig {
  readonly classes: Readonly<Record<string, EngineConfig>>;
  readonly otherKeys: readonly string[];
}

/**
 * The classes of runtime config file `file` (a relative cwd taken from
 * `base`, the directory join runs in). Throws a ConfigError headed by
 * `--config <file>` with the runtime app's problems.
 */
export function joinConfig(file: string, base: string): JoinConfig {
  try {
    return classesOfFile(file, base);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    throw new ConfigError(`--config ${file}: invalid configuration`, error.problems, { cause: error });
  }
}
