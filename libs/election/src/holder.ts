import { SwitchyardError } from '@switchyard/protocol';

/** Who holds a lease: a scheduler replica and the address its peers dial. */
export interface Holder {
  readonly id: string;
  readonly address: string;
}

/**
 * `${id}@${address}`. The id must not contain `@` (the address may), so the
 * first `@` always splits the two. Throws `SwitchyardError(invalid_request)`
 * for an empty id or address, or an id with `@`.
 */
export function formatHolder(holder: Holder): string {
  if (holder.id === '' || holder.id.includes('@')) {
    throw new SwitchyardError('invalid_request', `holder id must be non-empty and contain no '@': ${holder.id}`);
  }
  if (holder.address === '') throw new SwitchyardError('invalid_request', 'holder address must be non-empty');
  return `${holder.id}@${holder.address}`;
}

/** Inverse of `formatHolder`; `undefined` for a free lease or a value not in that form. */
export function parseHolder(value: string | undefined): Holder | undefined {
  if (value === undefined) return undefined;
  const at = value.indexOf('@');
  if (at <= 0 || at === value.length - 1) return undefined;
  return { id: value.slice(0, at), address: value.slice(at + 1) };
}
