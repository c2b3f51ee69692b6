// The runtime's sandbox classes as its config states them, made into the
// engines the runtime lib runs; shared with `switchyard runtime join
// --config`, which serves the classes of a runtime config file.
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { EngineConfig } from '@switchyard/sandbox';
import { ConfigError, loadConfig } from '@switchyard/service';
import { runtimeConfigSchema, type RuntimeConfig } from './config.ts';

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

/** What a runtime config file gives a command that takes only its classes. */
export interface ClassesOfFile {
  /** The engine of each class the file names, cwd made absolute against the base given. */
  readonly classes: Record<string, EngineConfig>;
  /** The file's other top-level keys, which such a command does not take (its own flags set what they set). */
  readonly otherKeys: readonly string[];
}

/**
 * The classes of runtime config file `file`, read and checked as the runtime
 * app reads it (the whole file: every key it sets must be one the app
 * takes, with a value it takes; `schedulerUrl` not required), a relative cwd
 * taken from `base`. Throws a ConfigError with the app's problems, and one
 * for a file that names no classes (the app's default, `demo`, is not one
 * the file names).
 */
export function classesOfFile(file: string, base: string): ClassesOfFile {
  let keys: readonly string[] = [];
  const config = loadConfig(runtimeConfigSchema.partial(), {
    argv: [`--config=${file}`],
    env: {},
    onFileKeys: (told) => (keys = told),
    derive: (c) => withClassDirs({ ...c, classes: c.classes ?? {} }, base),
  });
  if (!keys.includes('classes')) {
    throw new ConfigError('invalid configuration', [`config file ${file} names no classes`]);
  }
  return { classes: engineConfigs(config.classes ?? {}), otherKeys: keys.filter((key) => key !== 'classes') };
}
