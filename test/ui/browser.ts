// The browser the live page tests drive: the distribution's Chromium through
// playwright-core (no browser download), headless.
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** A test's `skip` option: false with Chromium installed, else the reason printed. */
export const skipWithoutChromium: string | false = existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} is missing (Debian package: chromium)`;

/** Switches that keep a headless Chromium from reaching out or needing a GPU or a sandbox. */
export const CHROMIUM_ARGS: readonly string[] = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
];

/**
 * `backForwardCache`: keep pages left by a navigation in the back/forward
 * cache, as a user's browser does; Playwright turns the cache off by default.
 */
export function launchChromium(options: { readonly backForwardCache?: boolean } = {}): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS],
    ...(options.backForwardCache ? { ignoreDefaultArgs: ['--disable-back-forward-cache'] } : {}),
  });
}
