import { z } from 'zod';
import { ConfigError } from './error.ts';

/** The shape of a value as the env and flag parsers coerce it. */
export type FieldKind = 'string' | 'number' | 'boolean' | 'enum' | 'array' | 'record';

/** One settable option of a config schema (a leaf; nested objects are flattened). */
export interface ConfigField {
  /** Key path, e.g. `['election', 'leaseName']`. */
  readonly path: readonly string[];
  /** Dotted key, e.g. `election.leaseName`. */
  readonly key: string;
  /** Environment name, e.g. `SWITCHYARD_ELECTION_LEASE_NAME`. */
  readonly envName: string;
  /** Preferred flag, e.g. `--election.lease-name`; `--election-lease-name` is accepted too. */
  readonly flag: string;
  readonly kind: FieldKind;
  /** For arrays, the kind of each element. */
  readonly elementKind?: FieldKind;
  readonly enumValues?: readonly string[];
  readonly required: boolean;
  readonly hasDefault: boolean;
  readonly defaultValue?: unknown;
  /** Human text for a default computed at start (e.g. `the host name`). */
  readonly defaultText?: string;
  readonly description: string;
  readonly secret: boolean;
}

/** Metadata keys this lib reads from `z.globalRegistry` (set with `.meta({...})`). */
export interface ConfigMeta {
  /** Redacted by `--print-config` and marked in docs. */
  secret?: boolean;
  /** Describes a default computed at start, for help and docs. */
  defaultText?: string;
}

export const ENV_PREFIX = 'SWITCHYARD_';

type AnySchema = z.core.$ZodType;

function defOf(schema: AnySchema): z.core.$ZodTypeDef & Record<string, unknown> {
  return schema._zod.def as z.core.$ZodTypeDef & Record<string, unknown>;
}

function metaOf(schema: AnySchema): (ConfigMeta & { description?: string }) | undefined {
  return z.globalRegistry.get(schema) as (ConfigMeta & { description?: string }) | undefined;
}

/** Wrappers the walker looks through; each may carry metadata or a default. */
const WRAPPERS = new Set(['optional', 'default', 'prefault', 'nullable', 'readonly', 'catch']);

export interface Unwrapped {
  readonly inner: AnySchema;
  readonly layers: readonly AnySchema[];
  readonly optional: boolean;
  readonly hasDefault: boolean;
  readonly defaultValue?: unknown;
}

/** Strips optional/default wrappers, remembering what they said. */
export function unwrap(schema: AnySchema): Unwrapped {
  const layers: AnySchema[] = [];
  let optional = false;
  let hasDefault = false;
  let defaultValue: unknown;
  let current = schema;
  for (;;) {
    layers.push(current);
    const def = defOf(current);
    if (!WRAPPERS.has(def.type)) break;
    if (def.type === 'optional' || def.type === 'nullable') optional = true;
    if ((def.type === 'default' || def.type === 'prefault') && !hasDefault) {
      hasDefault = true;
      defaultValue = def.defaultValue;
    }
    current = def.innerType as AnySchema;
  }
  return { inner: current, layers, optional, hasDefault, defaultValue };
}

/** First value of a metadata key found from the outermost wrapper inwards. */
export function metaValue<K extends keyof (ConfigMeta & { description?: string })>(
  layers: readonly AnySchema[],
  key: K,
): (ConfigMeta & { description?: string })[K] | undefined {
  for (const layer of layers) {
    const value = metaOf(layer)?.[key];
    if (value !== undefined) return value;
  }
  return undefined;
}

function kindOf(schema: AnySchema): FieldKind | 'object' | undefined {
  const type = defOf(schema).type;
  switch (type) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'enum':
    case 'array':
    case 'record':
    case 'object':
      return type;
    case 'literal':
      return 'enum';
    default:
      return undefined;
  }
}

const upperSnake = (key: string): string => key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();
const kebab = (key: string): string => key.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase();

export function envNameOf(path: readonly string[]): string {
  return ENV_PREFIX + path.map(upperSnake).join('_');
}

/** Both accepted flag spellings, without the leading `--`: dotted and all-hyphen. */
export function flagNamesOf(path: readonly string[]): readonly [string, string] {
  const parts = path.map(kebab);
  return [parts.join('.'), parts.join('-')];
}

function enumValuesOf(schema: AnySchema): string[] | undefined {
  const def = defOf(schema);
  if (def.type === 'enum') return Object.values(def.entries as Record<string, string>).map(String);
  if (def.type === 'literal') return (def.values as unknown[]).map(String);
  return undefined;
}

/**
 * Flattens a config schema into its leaf options, in declaration order.
 * Throws a ConfigError for a schema this loader cannot drive from env and
 * flags (an unsupported type or a field without a description), so a bad
 * schema fails at the first start, not in production.
 */
export function configFields(schema: z.ZodObject): ConfigField[] {
  const out: ConfigField[] = [];
  const problems: string[] = [];
  walk(schema, [], out, problems);
  if (problems.length > 0) throw new ConfigError('config schema is not usable', problems);
  const byEnv = new Map<string, string>();
  for (const field of out) {
    const clash = byEnv.get(field.envName);
    if (clash) problems.push(`${field.key} and ${clash} share the env name ${field.envName}`);
    byEnv.set(field.envName, field.key);
  }
  if (problems.length > 0) throw new ConfigError('config schema is not usable', problems);
  return out;
}

function walk(schema: z.ZodObject, prefix: string[], out: ConfigField[], problems: string[]): void {
  for (const [name, child] of Object.entries(schema.shape)) {
    const path = [...prefix, name];
    const key = path.join('.');
    const u = unwrap(child as AnySchema);
    const kind = kindOf(u.inner);
    if (kind === 'object') {
      walk(u.inner as z.ZodObject, path, out, problems);
      continue;
    }
    const description = metaValue(u.layers, 'description');
    if (!description) problems.push(`${key}: every option needs a .describe() text`);
    if (!kind) {
      problems.push(`${key}: unsupported schema type '${defOf(u.inner).type}'`);
      continue;
    }
    let elementKind: FieldKind | undefined;
    let enumValues = enumValuesOf(u.inner);
    if (kind === 'array') {
      const element = unwrap(defOf(u.inner).element as AnySchema).inner;
      const ek = kindOf(element);
      if (ek !== 'string' && ek !== 'number' && ek !== 'enum') {
        problems.push(`${key}: arrays must hold strings, numbers or enum values`);
        continue;
      }
      elementKind = ek;
      enumValues = enumValuesOf(element);
    }
    const defaultText = metaValue(u.layers, 'defaultText');
    out.push({
      path,
      key,
      envName: envNameOf(path),
      flag: `--${flagNamesOf(path)[0]}`,
      kind,
      ...(elementKind ? { elementKind } : {}),
      ...(enumValues ? { enumValues } : {}),
      required: !u.optional && !u.hasDefault,
      hasDefault: u.hasDefault,
      ...(u.hasDefault ? { defaultValue: u.defaultValue } : {}),
      ...(defaultText ? { defaultText } : {}),
      description: description ?? '',
      secret: isSecret(u.layers),
    });
  }
}

/** True when any wrapper layer of the field is marked `.meta({ secret: true })`. */
export function isSecret(layers: readonly AnySchema[]): boolean {
  return layers.some((layer) => metaOf(layer)?.secret === true);
}
