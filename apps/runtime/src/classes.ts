// The runtime's sandbox classes as its config states them, made into the
// engines the runtime lib runs; shared with `switchyard runtime join
// --config`, which serves the classes of a runtime config file.
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { EngineConfig } from '@switchyard/sandbox';
import { ConfigError } from '@switchyard/service';
import type { RuntimeConfig } from './config.ts';

type Classes = RuntimeConfig['classes'];

/** Why `dir` cannot be a server's working directory, or undefined when it can. */
function directoryProblem(dir: string): string | undefined {
  try {
    return statSync(dir).isDirectory() ? undefined : 'is not a directory';
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return code === 'ENOENT' ? 'does not exist' : `cannot be read (${String(code)})`;
  }
}

/**
 * `config` with the cwd of each stdio class made absolute against `base`
 * (the runtime's working directory at start), as `loadConfig`'s derive step.
 * Throws a ConfigError naming each class whose cwd is no directory: its
 * every sandbox would fail to spawn, one client at a time. Not guaranteed:
 * that the directory is still there when a sandbox starts.
 */
export function withClassDirs<C extends { readonly classes: Classes }>(config: C, base: string): C {
  const problems: string[] = [];
  const classes: Classes = {};
  for (const [name, c] of Object.entries(config.classes)) {
    const cwd = c.cwd === undefined ? undefined : resolve(base, c.cwd);
    const problem = cwd === undefined ? undefined : directoryProblem(cwd);
    if (problem !== undefined)
      problems.push(`classes.${name}.cwd: ${cwd} ${problem}: class ${name} runs its server there`);
    classes[name] = cwd === undefined ? c : { ...c, cwd };
  }
  if (problems.length > 0) throw new ConfigError('invalid configuration', problems);
  return { ...config, classes };
}

/** The engine of each class, as the runtime lib takes it (the schema has checked each engine's settings). */
export function engineConfigs(classes: Classes): Record<string, EngineConfig> {
  const out: Record<string, EngineConfig> = {};
  for (const [name, c] of Object.entries(classes)) {
    const common = { expireSeconds: c.expireSeconds, warmPool: c.warmPool, startTimeoutSeconds: c.startTimeoutSeconds };
    if (c.engine === 'builtin') out[name] = { engine: 'builtin', ...common };
    else if (c.engine === 'stdio' && c.command) {
      const cwd = c.cwd === undefined ? {} : { cwd: c.cwd };
      out[name] = { engine: 'stdio', command: c.command, args: c.args ?? [], env: c.env ?? {}, ...cwd, ...common };
    } else if (c.engine === 'http' && c.url) {
      out[name] = { engine: 'http', url: c.url, headers: c.headers ?? {}, ...common };
    } else throw new ConfigError('invalid configuration', [`classes.${name}: engine ${c.engine} is not configured`]);
  }
  return out;
}
