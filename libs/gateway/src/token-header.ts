import { SwitchyardError } from '@switchyard/protocol';
import type { GatewayLogger, TokenOption } from './options.ts';

/** What a token the gateway presents must look like, and where it goes. */
export interface TokenRule {
  readonly option: 'schedulerToken' | 'upstreamToken';
  readonly pattern: RegExp;
  /** The pattern in words, for errors. */
  readonly text: string;
  readonly to: string;
  /**
   * A token shorter than this passes, with a warning: where the rule came
   * later than deployments that run with shorter tokens, refusing them
   * would cut those off.
   */
  readonly lengthAdvised?: number;
}

// Visible ASCII: a relay's upgrade request is written by hand, so a token
// that could carry a line break or a space must never reach it.
export const SCHEDULER_TOKEN: TokenRule = {
  option: 'schedulerToken',
  pattern: /^[\x21-\x7e]{16,}$/,
  text: 'at least 16 visible ASCII characters',
  to: 'schedulers',
};
export const UPSTREAM_TOKEN: TokenRule = {
  option: 'upstreamToken',
  pattern: /^[\x21-\x7e]+$/,
  text: 'visible ASCII characters only',
  to: 'runtimes',
  // Runtimes take a token of any length (directListen.token); schedulers and gateways hold their own to 16.
  lengthAdvised: 16,
};

/** A fixed token that breaks its rule is a configuration error. */
export function checkToken(rule: TokenRule, token: string): string {
  if (!rule.pattern.test(token)) throw new SwitchyardError('invalid_request', `${rule.option} must be ${rule.text}`);
  return token;
}

const UNSEEN = Symbol('unseen');

/** Warns of a token shorter than its rule advises; `source` names the option (and file), never the token. */
function warnIfShort(rule: TokenRule, token: string, subject: string, source: object, logger: GatewayLogger): void {
  if (rule.lengthAdvised === undefined || token.length >= rule.lengthAdvised) return;
  logger.warn(
    source,
    `${subject} is shorter than ${rule.lengthAdvised} characters: ${rule.to} take it, but a short token is guessed easily`,
  );
}

/**
 * The `Authorization` value for a token option, asked on every request and
 * on every new connection: `Bearer <token>`, or undefined without one.
 *
 * A function is asked each time, and the header is built again only when
 * its answer changes, so a request while the token stays the same costs a
 * call and a comparison, no allocation. An answer that is undefined or
 * breaks the rule (a file emptied or garbled by mistake) is logged as an
 * error, once per change, and leaves the last good token in use, or none
 * before the first: a bad Secret update must not cut a working gateway off
 * while its peers still accept the old token, and the peers' refusals say
 * the rest once they stop. A change to a good token is logged too (never
 * the token). The lines name the function's `file`, when it has one. The
 * function is asked once here, so a bad value at start is reported at start.
 * A token shorter than the rule's `lengthAdvised` is warned of, at start
 * and at each change to one.
 */
export function tokenHeader(
  rule: TokenRule,
  token: TokenOption | undefined,
  logger: GatewayLogger,
): () => string | undefined {
  if (token === undefined) return () => undefined;
  if (typeof token === 'string') {
    const fixed = `Bearer ${checkToken(rule, token)}`;
    warnIfShort(rule, token, rule.option, { option: rule.option }, logger);
    return () => fixed;
  }
  // The option alone does not say where a bad value came from: a token file is named too.
  const file = token.file;
  const source = file === undefined ? { option: rule.option } : { option: rule.option, file };
  const subject = file === undefined ? rule.option : `${rule.option} from ${file}`;
  let seen: string | undefined | typeof UNSEEN = UNSEEN;
  let header: string | undefined;
  const changed = (value: string | undefined): void => {
    const first = seen === UNSEEN;
    seen = value;
    if (value !== undefined && rule.pattern.test(value)) {
      warnIfShort(rule, value, subject, source, logger);
      const next = `Bearer ${value}`;
      if (!first && next !== header) {
        logger.info(source, `${rule.option} changed: ${rule.to} are presented the new one`);
      }
      header = next;
      return;
    }
    const problem = value === undefined ? 'no token' : `a token that is not ${rule.text}`;
    const outcome =
      header === undefined
        ? `requests to ${rule.to} go without one`
        : `${rule.to} are still presented the last good one`;
    logger.error(source, `${subject} has ${problem}: ${outcome}`);
  };
  changed(token());
  return () => {
    const value = token();
    if (value !== seen) changed(value);
    return header;
  };
}
