import { z } from 'zod';
import { RUNTIME_LIMITS } from '@switchyard/protocol';
import { RUNTIME_STATE_DEFAULTS, joinTokenLineProblem } from '@switchyard/scheduler';
import {
  connectionsMaxField,
  hostIdentityField,
  httpUrl,
  processConfigFields,
  timerBounded,
  TIMER_DELAY_MS_MAX,
  WRITE_STALL_TIMEOUT_MS_DEFAULT,
  tlsFilesField,
} from '@switchyard/service';

/** Shortest join, peer or API token taken, inline or from a file: a short one is guessed too easily. */
export const TOKEN_LENGTH_MIN = 16;

const positiveMs = (defaultMs: number, text: string) =>
  timerBounded(z.number().int().min(1)).default(defaultMs).describe(text);

/** A count of a runtime's state entries: a whole number from 1 to the protocol's ceiling, which every replica takes. */
const stateCount = (defaultCount: number, ceiling: number, text: string) =>
  z.number().int().min(1).max(ceiling).default(defaultCount).describe(text);

const electionSchema = z
  .object({
    backend: z
      .enum(['memory', 'kubernetes', 'file'])
      .default('memory')
      .describe(
        'Lease backend: `memory` (one replica, or replicas in one process), `file` (replicas in several processes on one machine) or `kubernetes` (a coordination.k8s.io Lease).',
      ),
    leaseFile: z
      .string()
      .optional()
      .describe('Path of the lease file (file backend); every replica names the same file.'),
    namespace: z.string().min(1).default('default').describe('Namespace of the Lease (kubernetes backend).'),
    leaseName: z
      .string()
      .min(1)
      .default('switchyard-scheduler')
      .describe('Name of the Lease every replica competes for.'),
    leaseDurationMs: positiveMs(15000, 'How long a lease holds without renewal before others may take it.'),
    renewDeadlineMs: positiveMs(10000, 'How long the leader keeps trying to renew before it steps down.'),
    retryPeriodMs: positiveMs(2000, 'Interval between acquire/renew attempts.'),
    jitterFactor: z
      .number()
      .positive()
      .default(1.2)
      .describe(
        'A candidate waits retryPeriodMs × (1 + random × jitterFactor) between attempts, so candidates spread out; it also tries the moment the lease it saw expires.',
      ),
    kubeconfig: z
      .string()
      .optional()
      .describe('Path of a kubeconfig file; the in-cluster service account is used when absent.'),
  })
  .superRefine((e, ctx) => {
    // client-go's rule: the lease must outlive the renew deadline, which must outlive a jittered retry.
    if (!(e.leaseDurationMs > e.renewDeadlineMs && e.renewDeadlineMs > e.retryPeriodMs * e.jitterFactor)) {
      ctx.addIssue({
        code: 'custom',
        message: 'needs leaseDurationMs > renewDeadlineMs > retryPeriodMs × jitterFactor',
      });
    }
    // One lease attempt may take a retry period, and a leader must be done renewing within its deadline.
    if (e.retryPeriodMs > e.renewDeadlineMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['retryPeriodMs'],
        message: `at most renewDeadlineMs (${e.renewDeadlineMs}): a lease attempt may take a retry period, and a leader that has not renewed within renewDeadlineMs steps down`,
      });
    }
    // A candidate waits up to this; Node.js would run a longer timer after 1 ms, and try again at once.
    if (e.retryPeriodMs * (1 + e.jitterFactor) > TIMER_DELAY_MS_MAX) {
      ctx.addIssue({
        code: 'custom',
        path: ['retryPeriodMs'],
        message: `retryPeriodMs × (1 + jitterFactor), a candidate's longest wait between attempts, must be at most ${TIMER_DELAY_MS_MAX} (24.8 days): a longer timer would fire at once`,
      });
    }
  });

/** Options of the scheduler replica (`switchyard-scheduler`). */
export const schedulerConfigSchema = z.object({
  host: z.string().default('0.0.0.0').describe('Address the HTTP/WebSocket listener binds.'),
  port: z.number().int().min(0).max(65535).default(7070).describe('Port of the listener (0 picks a free port).'),
  metricsPort: z
    .number()
    .int()
    .min(0)
    .max(65535)
    .optional()
    .describe(
      "A listener of its own answering /metrics and /healthz, plain HTTP on host (0 picks a free port, named on the ready line), for a liveness probe and scrapes that a port full of connections (connectionsMax) does not refuse: the kubelet would restart the replica, closing every tunnel it holds. The replica's port serves both as well. Unset: no such listener.",
    ),
  replicaId: hostIdentityField('Stable id of this replica; set it explicitly in production (the pod name).'),
  advertiseUrl: httpUrl()
    // It is the ownerUrl of every runtime this replica holds, which a runtime state carries up to this length.
    .max(RUNTIME_LIMITS.addressLengthMax)
    .optional()
    .meta({ defaultText: 'http://<host>:<port>, 127.0.0.1 for host 0.0.0.0 or :: (https: with tls)' })
    .describe('Base URL peers and gateways use to reach this replica (the pod IP in a cluster).'),
  tls: tlsFilesField(
    'the replica serves HTTPS (HTTP/1.1, and HTTP/2 by ALPN)',
    "TLS on the replica's own port, for runtimes and gateways that reach it without a TLS-ending Ingress or load balancer in front.",
  ),
  election: electionSchema.prefault({}).describe('Leader election.'),
  joinTokens: z
    .array(
      z.string().superRefine((line, ctx) => {
        const problem = joinTokenLineProblem(line);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
        if ((line.trim().split(/\s+/)[0] ?? '').length < TOKEN_LENGTH_MIN) {
          ctx.addIssue({ code: 'custom', message: `a token is at least ${TOKEN_LENGTH_MIN} characters` });
        }
      }),
    )
    .default([])
    .meta({ secret: true })
    .describe(
      'Tokens runtimes present to join, each alone (admits any runtime id) or followed by a blank and a runtime id pattern (admits only the ids it matches; `*` stands for any run of characters, e.g. `<token> gpu-*`). A runtime id connected with one token is not taken over by a connect with another while its tunnel is open, on this replica or, once an epoch shows it, on another (409). With none here and no joinTokenFile, no runtime can join.',
    ),
  joinTokenFile: z
    .string()
    .optional()
    .describe(
      `File of join tokens, one per line, as joinTokens (\`<token>\` or \`<token> <runtime id pattern>\`); re-read when it changes (for mounted Secrets): a tunnel whose token is removed, or whose token's pattern no longer admits its id, is closed. A line whose token is shorter than ${TOKEN_LENGTH_MIN} characters is left out, with a warning naming the file; a line whose pattern is malformed admits no runtime id.`,
    ),
  peerTokens: z
    .array(z.string().min(TOKEN_LENGTH_MIN))
    .default([])
    .meta({ secret: true })
    .describe(
      "Tokens the cluster's replicas share to sync epochs: each admits a peer to the sync, and a follower presents them to its leader. With none here and no peerTokenFile, the join tokens do both, so whoever holds a runtime's join token can sync as a follower and report runtimes of its own making: give every replica the same peer tokens.",
    ),
  peerTokenFile: z
    .string()
    .optional()
    .describe(
      `File of peer tokens, one per line; re-read when it changes (for mounted Secrets). A line shorter than ${TOKEN_LENGTH_MIN} characters is left out, with a warning naming the file. Named, join tokens admit no peer even while the file lists none (emptied, missing, or of short lines only): no peer syncs then.`,
    ),
  apiTokens: z
    .array(z.string().min(TOKEN_LENGTH_MIN))
    .default([])
    .meta({ secret: true })
    .describe(
      'Tokens gateways (their schedulerToken) and operators present on the scheduler API and live page. With none here and no apiTokenFile, the API is open to whoever reaches the port.',
    ),
  apiTokenFile: z
    .string()
    .optional()
    .describe(
      `File of API tokens, one per line; re-read when it changes (for mounted Secrets). A line shorter than ${TOKEN_LENGTH_MIN} characters is left out, with a warning naming the file. Named, the API wants a token even while the file lists none (emptied, missing, or of short lines only): it refuses every caller then, never opens.`,
    ),
  connectionsMax: connectionsMaxField(
    "Most connections the replica's listener holds at once, of every kind (runtime tunnels, gateways' relay, /api/proxy and HTTP/2 connections, peers, connections still sending their headers); one more is closed unread, counted in connections_refused_total and warned of at most once per 10 s. Keep it well above maxRuntimes plus the /api/proxy connections of a burst of calls (one per call in flight).",
  ),
  maxRuntimes: z.number().int().min(1).default(1000).describe('Most runtime tunnels this replica holds at once.'),
  runtimeState: z
    .object({
      processesMax: stateCount(
        RUNTIME_STATE_DEFAULTS.processesMax,
        RUNTIME_LIMITS.processesMax,
        "Most processes (sandboxes) this replica mirrors of one runtime whose tunnel it holds, at most the protocol's 1,000,000. The default is the reference runtime's own limit, which a well-behaved one never passes.",
      ),
      threadsMax: stateCount(
        RUNTIME_STATE_DEFAULTS.threadsMax,
        RUNTIME_LIMITS.threadsMax,
        "Most threads (legacy sessions) this replica mirrors of one runtime whose tunnel it holds, at most the protocol's 10,000,000 (about 350 bytes each at the longest ids). The default is the reference runtime's own limit.",
      ),
    })
    .prefault({})
    .describe(
      "What a replica holds of one runtime's state, so that a broken runtime, or one whose join token was stolen, cannot run the replica out of memory. A runtime reporting more takes no new sandbox until it reports less (asked again every 30 s; its sessions and sandboxes go on there) and an error (`runtime state over the limits`) names it; raise these (and the replicas' memory, on every replica) only for runtimes built to hold more.",
    ),
  tunnel: z
    .object({
      pingIntervalMs: positiveMs(5000, 'Interval of HTTP/2 pings on each runtime tunnel (liveness).'),
    })
    .prefault({})
    .describe('Runtime tunnels.'),
  gatewayPingIntervalMs: timerBounded(z.number().int().min(100))
    .default(10000)
    .describe(
      "Interval of HTTP/2 pings on each gateway connection (its event streams); one unanswered for as long again closes the connection, ending its streams and the runtimes' streams behind them, so a gateway whose host vanished without a reset holds them for at most twice this (not the kernel's retransmission timeout, about 15 minutes).",
    ),
  writeStallTimeoutMs: timerBounded(z.number().int().min(1000))
    .default(WRITE_STALL_TIMEOUT_MS_DEFAULT)
    .describe(
      "How long a connection's writes may wait with no byte taken by its peer before the connection is closed (HTTP/1.1 ones: /api/proxy requests, relay connections), ending its stream and the runtime's stream behind it: HTTP/1.1 has no ping, so a gateway whose host vanished without a reset would hold a stream that keeps writing until the kernel's retransmission timeout, about 15 minutes. A reader that keeps taking bytes is kept. On Linux, a connection the kernel has retransmitted to for as long with no acknowledgement (a stream that writes only keep-alive comments, which never backs up) is closed too.",
    ),
  epoch: z
    .object({
      cycleIntervalMs: positiveMs(1000, 'Interval between epoch sync cycles on the leader.'),
      cycleTimeoutMs: positiveMs(5000, 'How long the leader waits for followers in one cycle.'),
      staleAfterMs: positiveMs(
        10000,
        "Silence after which the leader commits a follower replica's runtimes as unavailable.",
      ),
      forgetAfterMs: positiveMs(
        300000,
        'Time after which the leader forgets a follower replica that stays disconnected, and the runtimes it held (any that live have redialled another replica).',
      ),
      frameBytesMax: z
        .number()
        .int()
        .min(64 * 1024)
        .default(64 * 1024 * 1024)
        .describe(
          "Largest epoch sync frame a replica takes from a peer, on every replica alike. Replicas of this release send a snapshot of the whole cluster or a follower's full part above it in parts, each within it, so it bounds a frame, not the cluster. A replica of an earlier release sends and takes every message whole: then a snapshot (about 1 KiB a runtime, plus its sessions) or full part above it closes the connection, and the follower, unable to follow, logs an error at most once a minute (the leader warns with the frame's size, and logs an error naming a follower whose frame it refused).",
        ),
      runBytesMax: z
        .number()
        .int()
        .min(64 * 1024)
        .default(512 * 1024 * 1024)
        .describe(
          "Largest run of parts (a snapshot or full part sent in frames) a replica takes from a peer, its frames together, on every replica alike: what a peer can make a replica hold for one run. A run above it closes the connection, and that follower cannot sync until it is raised (the follower, or the leader for a follower's run, logs an error at most once a minute); raise it (and the replicas' memory) for a cluster whose state is larger.",
        ),
    })
    .prefault({})
    .describe('Epoch sync.'),
  ...processConfigFields,
});

export type SchedulerConfig = z.output<typeof schedulerConfigSchema>;
