import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';

let loaded: typeof Yaml | undefined;

/**
 * The YAML library, loaded on first use: most processes are configured by
 * flags and environment alone and never print their config, and loading it
 * costs about 2 MB of RSS in every process that does not.
 */
export function yaml(): typeof Yaml {
  return (loaded ??= createRequire(import.meta.url)('yaml') as typeof Yaml);
}
