import { readFileSync } from 'node:fs';
import type { z } from 'zod';
import { PROTO_KEY_MESSAGE } from '@switchyard/protocol';
import { ConfigError } from './error.ts';
import { configFields, unwrap, type ConfigField } from './fields.ts';
import { helpText, printableConfig } from './render.ts';
import { CONFIG_ENV, deepMerge, envLayer, fileLayer, flagLayer, isPlainObject, setPath } from './sources.ts';
import type { Layer } from './sources.ts';

export interface LoadConfigOptions {
  /** Arguments after the script name (`process.argv.slice(2)`). */
  readonly argv: readonly string[];
  /** The environment to read `SWITCHYARD_*` from (`process.env`); only apps pass it. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Extra text for `--help`, e.g. how computed defaults are derived. */
  readonly defaultsNote?: string;
  /** Program name shown by `--help`. Default `switchyard`. */
  readonly program?: string;
  /** Reads the config file. Default: `fs.readFileSync(path, 'utf8')`. */
  readonly readFile?: (path: string) => string;
  /** Where `--help` and `--print-config` write. Default: stdout. */
  readonly print?: (text: string) => void;
  /** Ends the process after `--help`/`--print-config`. Default: `process.exit`. */
  readonly exit?: (code: number) => never;
  /**
   * Told the top-level keys the config file sets, once it is read and parsed (before any check of them),
   * for a command that takes only some of an app's options from it. Not called without a file.
   */
  readonly onFileKeys?: (keys: readonly string[]) => void;
}

/** Options of loadConfig with a hook that fills values computed from other values. */
export interface LoadConfigWithDerive<T> extends LoadConfigOptions {
  /** Runs after validation and before `--print-config`, e.g. advertiseUrl from port. */
  readonly derive?: (config: T) => T;
}

type AnySchema = z.core.$ZodType;

/** Keys of a layer that the schema would not take as given. */
interface StrayKeys {
  /** Keys no schema field has. */
  readonly unknown: string[];
  /** A map's own `__proto__` keys, which zod drops unseen (a field's is an unknown key). */
  readonly proto: string[];
}

/** Stray keys of a file (or JSON value), recursing into objects and records of objects. */
function strayKeys(schema: AnySchema, value: unknown, path: string, out: StrayKeys): void {
  const inner = unwrap(schema).inner;
  const def = inner._zod.def as { type: string; shape?: Record<string, AnySchema>; valueType?: AnySchema };
  if (!isPlainObject(value)) return;
  if (def.type === 'object' && def.shape) {
    for (const [key, child] of Object.entries(value)) {
      const where = path === '' ? key : `${path}.${key}`;
      // Own keys only: `constructor` or `toString` would find Object's, which are no schemas.
      const childSchema = Object.hasOwn(def.shape, key) ? def.shape[key] : undefined;
      if (!childSchema) out.unknown.push(where);
      else strayKeys(childSchema, child, where, out);
    }
  } else if (def.type === 'record' && def.valueType) {
    for (const [key, child] of Object.entries(value)) {
      if (key === '__proto__') out.proto.push(`${path}.${key}`);
      else strayKeys(def.valueType, child, `${path}.${key}`, out);
    }
  }
}

/** The problems of a layer's stray keys, each with where it came from. */
function strayKeyProblems(schema: AnySchema, layer: Layer, from: (key: string) => string): string[] {
  const stray: StrayKeys = { unknown: [], proto: [] };
  strayKeys(schema, layer.values, '', stray);
  return [
    ...stray.unknown.map((key) => `unknown key '${key}' ${from(key)}`),
    ...stray.proto.map((key) => `${key}: ${PROTO_KEY_MESSAGE} (${from(key)})`),
  ];
}

/**
 * A file's single value for a list option (`audience: x`) as the list of
 * it, as env and flags take one: an option that became a list keeps its
 * single form. Not split on commas: in a file, a string is one value.
 */
function listsOfOne(fields: readonly ConfigField[], values: Record<string, unknown>): void {
  for (const field of fields) {
    if (field.kind !== 'array') continue;
    const value = valueAt(values, field.path);
    if (value !== undefined && value !== null && typeof value !== 'object') setPath(values, field.path, [value]);
  }
}

function valueAt(value: unknown, path: readonly string[]): unknown {
  return path.reduce<unknown>((at, key) => (isPlainObject(at) ? at[key] : undefined), value);
}

function issuePath(path: readonly PropertyKey[]): string {
  return path.map(String).join('.');
}

/** An issue's message; for a bad key of a map, what the key must be rather than zod's "Invalid key in record". */
function issueText(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_key') return issue.issues[0]?.message ?? issue.message;
  return issue.message;
}

/** The sources that set `key`, a parent of it, or (for a whole-object issue) any key inside it. */
function originOf(key: string, layers: readonly Layer[]): string {
  const found = new Set<string>();
  for (const layer of layers) {
    for (const [setKey, origin] of layer.origins) {
      const parent = setKey === '' || key === setKey || key.startsWith(`${setKey}.`);
      const child = key === '' || setKey.startsWith(`${key}.`);
      if (parent || child) found.add(origin);
    }
  }
  return found.size === 0 ? 'defaults' : [...found].join(', ');
}

/**
 * Builds an app's config: schema defaults < file (`--config` or
 * SWITCHYARD_CONFIG) < env (`SWITCHYARD_*`) < flags, validated once.
 *
 * Guarantees: unknown keys in the file, unknown `SWITCHYARD_*` names and
 * unknown flags are all fatal; every problem found is reported in one
 * ConfigError, unknown keys and invalid values together (a config file that
 * cannot be read or parsed is reported without checking values). `--help`
 * and `--print-config` (secrets and URL credentials redacted) print and
 * call `exit(0)`. Does not watch the file: the config is fixed for the
 * process lifetime (files named by options, e.g. token files, are the
 * consumer's to re-read).
 */
export function loadConfig<S extends z.ZodObject>(schema: S, options: LoadConfigWithDerive<z.output<S>>): z.output<S> {
  const fields = configFields(schema);
  const print = options.print ?? ((text: string) => void process.stdout.write(text));
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const flags = flagLayer(fields, options.argv);
  if (flags.help) {
    print(helpText(options.program ?? 'switchyard', fields, options.defaultsNote));
    return exit(0);
  }
  const env = envLayer(fields, options.env);
  const layers: Layer[] = [];
  const problems: string[] = [];
  const filePath = flags.configPath ?? (options.env[CONFIG_ENV] || undefined);
  // A file that could not be read or parsed may set any key: checking the values without it would call its keys missing.
  let fileUnread = false;
  if (filePath !== undefined) {
    let text: string | undefined;
    try {
      text = (options.readFile ?? ((p: string) => readFileSync(p, 'utf8')))(filePath);
    } catch (error) {
      problems.push(`config file ${filePath}: ${(error as Error).message}`);
      fileUnread = true;
    }
    if (text !== undefined) {
      const file = fileLayer(filePath, text);
      listsOfOne(fields, file.values);
      problems.push(...file.problems);
      fileUnread = file.problems.length > 0;
      if (!fileUnread) options.onFileKeys?.(Object.keys(file.values));
      problems.push(...strayKeyProblems(schema, file, () => `in config file ${filePath}`));
      layers.push(file);
    }
  }
  problems.push(...env.problems, ...flags.problems);
  layers.push(env, flags);
  for (const layer of [env, flags]) {
    problems.push(...strayKeyProblems(schema, layer, (key) => `from ${originOf(key, [layer])}`));
  }
  if (fileUnread) throw new ConfigError('invalid configuration', problems);

  // The values are checked even when a key is unknown, so that one run lists every problem.
  const merged = layers.reduce<Record<string, unknown>>((acc, layer) => deepMerge(acc, layer.values), {});
  const result = schema.safeParse(merged);
  if (!result.success) {
    for (const issue of result.error.issues) {
      const key = issuePath(issue.path);
      // zod's 'expected string, received undefined (from defaults)' does not say that nothing set the key, nor how to.
      const field = fields.find((f) => f.key === key && f.required);
      if (field && valueAt(merged, field.path) === undefined) {
        problems.push(`${key}: required; set it with ${field.flag}, ${field.envName} or '${key}' in the config file`);
      } else {
        problems.push(`${key || '(root)'}: ${issueText(issue)} (from ${originOf(key, layers)})`);
      }
    }
  }
  if (problems.length > 0 || !result.success) throw new ConfigError('invalid configuration', problems);
  const config = options.derive ? options.derive(result.data) : result.data;
  if (flags.printConfig) {
    print(printableConfig(schema, config));
    return exit(0);
  }
  return config;
}

/**
 * loadConfig for an app's entry point: an invalid config (a ConfigError,
 * also one thrown by `derive`) is written to stderr as `<program>: invalid
 * configuration:` and one problem per line, without a stack (the list is
 * the whole story), and the process exits 2. Other errors propagate.
 */
export function loadAppConfig<S extends z.ZodObject>(
  schema: S,
  options: LoadConfigWithDerive<z.output<S>> & { readonly report?: (text: string) => void },
): z.output<S> {
  try {
    return loadConfig(schema, options);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const report = options.report ?? ((text: string) => void process.stderr.write(text));
    report(`${options.program ?? 'switchyard'}: ${error.message}\n`);
    return (options.exit ?? ((code: number) => process.exit(code)))(2);
  }
}
