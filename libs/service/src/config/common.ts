import { hostname } from 'node:os';
import { z } from 'zod';
import { IDENTITY_VALUE_PATTERN } from '@switchyard/protocol';
import { LOG_LEVELS } from '../logger.ts';
import { redisUrlProblem } from '../redis-url.ts';
import { CONNECTIONS_MAX_DEFAULT } from '../connections.ts';

/**
 * Longest delay a Node.js timer keeps (2^31 - 1 ms, 24.8 days): a longer one
 * fires after 1 ms, so a time option past it would act at once.
 */
export const TIMER_DELAY_MS_MAX = 2_147_483_647;

/** `schema` held to what a timer keeps, for an option counted in `unitMs` (1 for ms, 1000 for seconds). */
export function timerBounded(schema: z.ZodNumber, unitMs = 1): z.ZodNumber {
  const max = Math.floor(TIMER_DELAY_MS_MAX / unitMs);
  return schema.max(max, `at most ${max} (24.8 days): a longer timer would fire at once`);
}

/**
 * An http: or https: URL. `z.url()` alone takes any scheme, and a URL written
 * without one (`scheduler:7070`) parses as the scheme `scheduler:`: accepted
 * at start, it failed at the first request.
 */
export function httpUrl() {
  return z.url().refine((url) => /^https?:\/\//i.test(url), 'must be an http:// or https:// URL');
}

/** A listener's connectionsMax option (see capConnections), described by `description`: what it holds, how to size it. */
export function connectionsMaxField(description: string) {
  return z.number().int().min(1).default(CONNECTIONS_MAX_DEFAULT).describe(description);
}

/** An optional Redis URL option, checked at start (`redisUrlProblem`) and redacted; `what` opens its description. */
export function redisUrlField(what: string) {
  return z
    .string()
    .superRefine((url, ctx) => {
      const problem = redisUrlProblem(url);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .optional()
    .meta({ secret: true })
    .describe(
      `${what}: redis://[user:password@]host[:port][/db], or rediss:// for TLS (a private CA through NODE_EXTRA_CA_CERTS). Percent-encode reserved characters of the user name and password (# as %23, @ as %40). Checked at start.`,
    );
}

/** Options every app process has, to spread into its config schema. */
export const processConfigFields = {
  logLevel: z.enum(LOG_LEVELS).default('info').describe('Minimum log level.'),
  drainDelayMs: timerBounded(z.number().int().min(0))
    .default(5000)
    .describe('On SIGTERM, time spent unready before listeners close, so endpoints stop routing here.'),
};

/** A component's stable id: an identity value that defaults to the host name (the pod name in Kubernetes). */
export function hostIdentityField(description: string) {
  return z
    .string()
    .regex(IDENTITY_VALUE_PATTERN)
    .default(() => hostname())
    .meta({ defaultText: 'the host name' })
    .describe(description);
}

/** TLS on an app's own port: a PEM certificate chain and its key, both or neither. */
export function tlsFilesField(served: string, description: string) {
  return z
    .object({
      certFile: z
        .string()
        .optional()
        .describe(
          `PEM certificate chain. With keyFile, ${served} on this port instead of HTTP; both files are read again when they change.`,
        ),
      keyFile: z.string().optional().describe('PEM private key of certFile.'),
    })
    .prefault({})
    .refine((t) => (t.certFile === undefined) === (t.keyFile === undefined), {
      message: 'set both certFile and keyFile, or neither',
    })
    .describe(description);
}
