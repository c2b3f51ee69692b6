import { hostname } from 'node:os';
import { z } from 'zod';
import { IDENTITY_VALUE_PATTERN } from '@switchyard/protocol';
import { LOG_LEVELS } from '../logger.ts';

/** Options every app process has, to spread into its config schema. */
export const processConfigFields = {
  logLevel: z.enum(LOG_LEVELS).default('info').describe('Minimum log level.'),
  drainDelayMs: z
    .number()
    .int()
    .min(0)
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
