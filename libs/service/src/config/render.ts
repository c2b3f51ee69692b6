import type { z } from 'zod';
import { yaml } from './yaml.ts';
import { isSecret, unwrap } from './fields.ts';
import type { ConfigField } from './fields.ts';
import { isPlainObject } from './sources.ts';

/** What `--print-config` shows instead of a secret value. */
export const REDACTED = '[redacted]';

type AnySchema = z.core.$ZodType;

/**
 * Copies `value`, replacing every field marked secret (also inside records,
 * e.g. per-class headers) with REDACTED. Arrays of secrets keep their length
 * so an operator can still count the tokens. A URL field (`z.url()`, as
 * `httpUrl()`) is shown with its user info and its query values redacted,
 * where URLs carry credentials (`https://user:pass@…`, `?api_key=…`); the
 * rest of it, and the query's names, stay readable.
 */
export function redactConfig(schema: AnySchema, value: unknown): unknown {
  const u = unwrap(schema);
  if (value === undefined) return value;
  if (isSecret(u.layers)) return Array.isArray(value) ? value.map(() => REDACTED) : REDACTED;
  const def = u.inner._zod.def as {
    type: string;
    format?: string;
    shape?: Record<string, AnySchema>;
    valueType?: AnySchema;
    element?: AnySchema;
  };
  if (def.format === 'url' && typeof value === 'string') return redactUrl(value);
  if (def.type === 'array' && def.element && Array.isArray(value)) {
    const element = def.element;
    return value.map((v: unknown) => redactConfig(element, v));
  }
  if (def.type === 'object' && isPlainObject(value) && def.shape) {
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value)) {
      const childSchema = def.shape[key];
      out[key] = childSchema ? redactConfig(childSchema, child) : child;
    }
    return out;
  }
  if (def.type === 'record' && isPlainObject(value) && def.valueType) {
    const valueType = def.valueType;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactConfig(valueType, v)]));
  }
  return value;
}

/** `url` with its user info and each query value replaced by REDACTED; unchanged when it has neither. */
function redactUrl(url: string): string {
  if (!URL.canParse(url)) return url;
  const parsed = new URL(url);
  const userinfo = parsed.username !== '' || parsed.password !== '';
  if (!userinfo && parsed.search === '') return url;
  // Put together by hand: URL would percent-encode the brackets of REDACTED.
  const names = [...parsed.searchParams.keys()];
  const query = names.length > 0 ? `?${names.map((n) => `${encodeURIComponent(n)}=${REDACTED}`).join('&')}` : '';
  return `${parsed.protocol}//${userinfo ? `${REDACTED}@` : ''}${parsed.host}${parsed.pathname}${query}${parsed.hash}`;
}

export function printableConfig(schema: AnySchema, config: unknown): string {
  return yaml().stringify(redactConfig(schema, config), { lineWidth: 0 });
}

/** The type as people write it; `sources` adds how env and flags spell lists and maps. */
function typeText(field: ConfigField, sources = true): string {
  if (field.kind === 'enum') return field.enumValues!.map((v) => `'${v}'`).join(' \\| ');
  if (field.kind === 'array') {
    // Escaped as an enum's are: a bare `|` would end the Markdown table cell.
    const element = field.elementKind === 'enum' ? `(${field.enumValues!.join(' \\| ')})` : field.elementKind;
    return sources ? `${element}[] (comma-separated)` : `${element}[]`;
  }
  if (field.kind === 'record') return sources ? 'map (JSON in env/flags)' : 'map';
  return field.kind;
}

/** The default as people read it: computed text, a JSON value, or required/none. */
export function defaultText(field: ConfigField): string {
  if (field.defaultText) return field.defaultText;
  if (field.hasDefault) return JSON.stringify(field.defaultValue);
  return field.required ? '(required)' : '(none)';
}

/** `--help` text: every option with its type, default and env name. */
export function helpText(program: string, fields: readonly ConfigField[], note?: string): string {
  const lines = [
    `Usage: ${program} [--config <file>] [options]`,
    '',
    'Sources, later wins: defaults < config file (--config or SWITCHYARD_CONFIG, YAML or JSON)',
    '< environment (SWITCHYARD_*) < flags. Unknown keys are fatal.',
    '',
    '  --config <file>     read a YAML or JSON config file',
    '  --print-config      print the effective config (secrets and URL credentials redacted) and exit',
    '  --help              print this help and exit',
    '',
  ];
  for (const f of fields) {
    const type = typeText(f).replaceAll('\\|', '|');
    lines.push(`  ${f.flag} <${type}>`);
    lines.push(`      ${f.description}${f.secret ? ' (secret)' : ''}`);
    lines.push(`      default: ${defaultText(f)}    env: ${f.envName}`);
  }
  if (note) lines.push('', note);
  return lines.join('\n') + '\n';
}

const cell = (text: string): string => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

function defaultCell(field: ConfigField): string {
  if (field.defaultText) return `_${cell(field.defaultText).replaceAll('<', '&lt;').replaceAll('>', '&gt;')}_`;
  return field.hasDefault ? `\`${cell(defaultText(field))}\`` : defaultText(field);
}

/**
 * A Markdown table of every option, for docs/configuration.md. Without
 * `sources` (settings inside a map option, such as a runtime's classes,
 * which no env name or flag reaches one by one) it has no env and flag
 * columns.
 */
export function markdownReference(fields: readonly ConfigField[], { sources = true } = {}): string {
  const rows = sources
    ? ['| key | env | flag | type | default | description |', '| --- | --- | --- | --- | --- | --- |']
    : ['| key | type | default | description |', '| --- | --- | --- | --- |'];
  for (const f of fields) {
    const description = cell(f.description) + (f.secret ? ' **Secret:** redacted by `--print-config`.' : '');
    const where = sources ? ` \`${f.envName}\` | \`${f.flag}\` |` : '';
    rows.push(`| \`${f.key}\` |${where} ${typeText(f, sources)} | ${defaultCell(f)} | ${description} |`);
  }
  return rows.join('\n') + '\n';
}
