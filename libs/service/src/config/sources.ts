import { yaml } from './yaml.ts';
import { coerce } from './coerce.ts';
import { ENV_PREFIX, flagNamesOf } from './fields.ts';
import type { ConfigField } from './fields.ts';

/** A plain nested object built from one source, plus where each key came from. */
export interface Layer {
  readonly values: Record<string, unknown>;
  /** Dotted key → human label of its origin (`SWITCHYARD_X`, `--x`, `file x.yaml`). */
  readonly origins: Map<string, string>;
  readonly problems: string[];
}

/** Env var naming the config file; reserved, never an option itself. */
export const CONFIG_ENV = `${ENV_PREFIX}CONFIG`;

export function setPath(target: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[path.at(-1)!] = value;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Later wins; objects merge key by key, anything else (arrays included) is replaced whole. */
export function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const prev = out[key];
    out[key] = isPlainObject(prev) && isPlainObject(value) ? deepMerge(prev, value) : value;
  }
  return out;
}

/** Parses a YAML or JSON config file (JSON is valid YAML); an empty file is an empty config. */
export function fileLayer(path: string, text: string): Layer {
  const layer: Layer = { values: {}, origins: new Map(), problems: [] };
  let parsed: unknown;
  try {
    parsed = yaml().parse(text);
  } catch (error) {
    layer.problems.push(`config file ${path}: ${(error as Error).message.split('\n')[0]}`);
    return layer;
  }
  if (parsed === null || parsed === undefined) return layer;
  if (!isPlainObject(parsed)) {
    layer.problems.push(`config file ${path}: the top level must be a mapping of keys`);
    return layer;
  }
  layer.origins.set('', `config file ${path}`);
  // Spread, not Object.assign: assigned, a top-level `__proto__` key would set the prototype of the
  // values, where no unknown-key check sees it.
  return { ...layer, values: { ...parsed } };
}

/**
 * What to do about an unknown name that someone other than the operator
 * set: kubelet's variables for a Service of the pod's namespace named
 * switchyard-… (`<NAME>_SERVICE_HOST`, `<NAME>_PORT=tcp://…`, …; see
 * pkg/kubelet/envvars), or the token of the switchyard CLI. Empty for the
 * rest, typos mostly.
 */
function unknownEnvHint(name: string, raw: string | undefined): string {
  const serviceLink =
    /_SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?$/.test(name) ||
    /_PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?$/.test(name) ||
    (name.endsWith('_PORT') && /^(tcp|udp|sctp):\/\//.test(raw ?? ''));
  if (serviceLink) {
    return ' (Kubernetes sets it for a Service of the namespace: set enableServiceLinks: false in the pod spec)';
  }
  if (name === 'SWITCHYARD_API_TOKEN') return " (the switchyard CLI's API token: unset it where an app starts)";
  return '';
}

/**
 * Reads every `SWITCHYARD_*` variable. An unknown name is a problem (a typo
 * must not silently fall back to a default). Empty values count as unset, so
 * templated manifests may leave a variable blank.
 */
export function envLayer(fields: readonly ConfigField[], env: Readonly<Record<string, string | undefined>>): Layer {
  const layer: Layer = { values: {}, origins: new Map(), problems: [] };
  const byName = new Map(fields.map((f) => [f.envName, f]));
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith(ENV_PREFIX) || name === CONFIG_ENV) continue;
    const raw = env[name];
    const field = byName.get(name);
    if (!field) {
      layer.problems.push(`unknown environment variable ${name}${unknownEnvHint(name, raw)}`);
      continue;
    }
    if (raw === undefined || raw === '') continue;
    const result = coerce(field, raw);
    if (!result.ok) layer.problems.push(`${name}: ${result.error}`);
    else {
      setPath(layer.values, field.path, result.value);
      layer.origins.set(field.key, name);
    }
  }
  return layer;
}

export interface FlagResult extends Layer {
  readonly help: boolean;
  readonly printConfig: boolean;
  readonly configPath?: string;
}

/**
 * Parses `--a.b-c=v`, `--a.b-c v`, `--a-b-c v`. A boolean flag alone means
 * true; repeating an array flag appends. Positional arguments are rejected.
 */
export function flagLayer(fields: readonly ConfigField[], argv: readonly string[]): FlagResult {
  const values: Record<string, unknown> = {};
  const origins = new Map<string, string>();
  const problems: string[] = [];
  const byFlag = new Map<string, ConfigField>();
  for (const field of fields) for (const name of flagNamesOf(field.path)) byFlag.set(name, field);
  let help = false;
  let printConfig = false;
  let configPath: string | undefined;
  const arrays = new Map<string, unknown[]>();

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') {
      help = true;
      continue;
    }
    if (arg === '--print-config') {
      printConfig = true;
      continue;
    }
    if (!arg.startsWith('--')) {
      problems.push(`unexpected argument '${arg}'`);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    let raw: string | undefined = eq === -1 ? undefined : arg.slice(eq + 1);
    const next = argv[i + 1];
    if (name === 'config') {
      if (raw === undefined && next !== undefined && !next.startsWith('--')) raw = argv[++i];
      if (raw === undefined) problems.push('--config needs a file path');
      else configPath = raw;
      continue;
    }
    const field = byFlag.get(name);
    if (!field) {
      problems.push(`unknown flag --${name}`);
      continue;
    }
    if (raw === undefined) {
      if (field.kind === 'boolean') {
        if (next === 'true' || next === 'false') raw = argv[++i];
        else raw = 'true';
      } else if (next !== undefined && !next.startsWith('--')) raw = argv[++i];
    }
    if (raw === undefined) {
      problems.push(`--${name} needs a value`);
      continue;
    }
    const result = coerce(field, raw);
    if (!result.ok) {
      problems.push(`--${name}: ${result.error}`);
      continue;
    }
    let value = result.value;
    if (field.kind === 'array') {
      const acc = arrays.get(field.key) ?? [];
      acc.push(...(value as unknown[]));
      arrays.set(field.key, acc);
      value = acc;
    }
    setPath(values, field.path, value);
    origins.set(field.key, `--${name}`);
  }
  return { values, origins, problems, help, printConfig, ...(configPath !== undefined ? { configPath } : {}) };
}
