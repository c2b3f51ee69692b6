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
      try {
        const value: unknown = JSON.parse(raw);
        if (typeof value === 'object' && value !== null && !Array.isArray(value)) return { ok: true, value };
      } catch {
        // fall through to the shared message
      }
      return { ok: false, error: 'expects a JSON object' };
    default:
      return { ok: true, value: raw };
  }
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
