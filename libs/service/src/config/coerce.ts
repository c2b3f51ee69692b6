import type { ConfigField, FieldKind } from './fields.ts';

export type Coerced = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: string };

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

function scalar(kind: FieldKind, raw: string, enumValues: readonly string[] | undefined): Coerced {
  switch (kind) {
    case 'number': {
      const value = raw.trim() === '' ? Number.NaN : Number(raw);
      return Number.isFinite(value) ? { ok: true, value } : { ok: false, error: `'${raw}' is not a number` };
    }
    case 'boolean': {
      const lower = raw.trim().toLowerCase();
      if (TRUE.has(lower)) return { ok: true, value: true };
      if (FALSE.has(lower)) return { ok: true, value: false };
      return { ok: false, error: `'${raw}' is not a boolean (true/false)` };
    }
    case 'enum':
      // Enum literals may be numbers or booleans in the schema; zod reports a mismatch with the choices.
      return enumValues?.includes(raw)
        ? { ok: true, value: raw }
        : { ok: false, error: `'${raw}' is not one of ${enumValues?.join(', ')}` };
    case 'record':
      return jsonObject(raw);
    default:
      return { ok: true, value: raw };
  }
}

/**
 * A map's JSON. A syntax error is told with where it is (from V8's `… in JSON
 * at position 37 (line 1 column 38)`), never with the text around it, which
 * V8's `Unexpected token` message quotes: maps hold secrets (a class's env
 * and headers), and the problem goes to stderr, a pod's log.
 */
function jsonObject(raw: string): Coerced {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (error) {
    const at = /at position (\d+)(?: \(line (\d+) column (\d+)\))?/.exec((error as Error).message);
    const where = !at ? '' : at[2] ? ` at line ${at[2]} column ${at[3]}` : ` at position ${at[1]}`;
    return { ok: false, error: `not valid JSON${where}: expects a JSON object` };
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return { ok: true, value };
  const what = Array.isArray(value) ? 'an array' : value === null ? 'null' : `a ${typeof value}`;
  return { ok: false, error: `expects a JSON object, not ${what}` };
}

/**
 * Turns the text of an env var or flag into the field's type. Arrays are
 * comma-separated (blank items dropped); records are JSON objects.
 */
export function coerce(field: ConfigField, raw: string): Coerced {
  if (field.kind !== 'array') return scalar(field.kind, raw, field.enumValues);
  const items = raw
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  const values: unknown[] = [];
  for (const item of items) {
    const one = scalar(field.elementKind ?? 'string', item, field.enumValues);
    if (!one.ok) return one;
    values.push(one.value);
  }
  return { ok: true, value: values };
}
