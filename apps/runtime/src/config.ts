import { z } from 'zod';
import {
  DRAINING_METADATA_KEY,
  IDENTITY_VALUE_PATTERN,
  RUNTIME_LIMITS,
  RUNTIME_VERSION_MESSAGE,
  isRuntimeVersion,
  metadataProblems,
} from '@switchyard/protocol';
import { METERING_QUEUE_LENGTH_MAX_DEFAULT } from '@switchyard/sandbox';
import {
  connectionsMaxField,
  hostIdentityField,
  httpUrl,
  processConfigFields,
  redisUrlField,
  timerBounded,
  TIMER_DELAY_MS_MAX,
  WRITE_STALL_TIMEOUT_MS_DEFAULT,
} from '@switchyard/service';

// What a runtime says of itself is checked by every scheduler it dials (X-Runtime-Info) and by
// its own state store; the same limits here refuse at start what would otherwise fail each
// dial with a 400, or crash the start with a stack.
const { classesMax, versionLengthMax, addressLengthMax, weightValueMax } = RUNTIME_LIMITS;

/** Longest tunnel ping interval: a dial is given an interval and a timeout (as long again), in one timer. */
const TUNNEL_PING_INTERVAL_MS_MAX = Math.floor(TIMER_DELAY_MS_MAX / 2);

/** RFC 9110 `token`: what an HTTP header name may be. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/**
 * What fetch sends in a header value: tabs, visible ASCII and U+0080-U+00FF.
 * It refuses any other control character (not only CR, LF and NUL) and
 * anything past U+00FF.
 */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** The settings of a class that only one engine uses, and that engine. */
const ENGINE_OF_KEY = {
  command: 'stdio',
  args: 'stdio',
  env: 'stdio',
  cwd: 'stdio',
  url: 'http',
  headers: 'http',
} as const;

/** One sandbox class of `classes` (documented on its own in docs/configuration.md). */
export const runtimeClassSchema = z
  .object({
    engine: z.enum(['builtin', 'stdio', 'http']).describe('How sandboxes of this class run.'),
    command: z
      .string()
      .optional()
      .describe(
        "Executable to spawn per sandbox (engine stdio): a name is looked up on PATH, a relative path is taken from the directory the server runs in (cwd, else the runtime's working directory); an absolute path does not depend on either. One the node lacks is warned of when the runtime starts (sandbox.command_not_found, naming the class), and fails every start of the class (spawn … ENOENT in sandbox.start_failed); the runtime's other classes serve on.",
      ),
    args: z
      .array(z.string())
      .optional()
      .describe('Arguments of command (engine stdio); shown by --print-config: keep API keys in env.'),
    env: z
      .record(z.string(), z.string())
      .optional()
      .meta({ secret: true })
      .describe(
        "Extra environment of command (engine stdio), where MCP servers take their API keys. Of the runtime's own environment the server gets only HOME, LOGNAME, PATH, SHELL, TERM and USER (not the runtime's tokens, nor proxy or CA settings such as HTTPS_PROXY or NODE_EXTRA_CA_CERTS): set here what else it needs; a PATH here is where command is looked up.",
      ),
    cwd: z
      .string()
      .min(1)
      .optional()
      .meta({ defaultText: "the runtime's working directory" })
      .describe(
        "Directory the server runs in (engine stdio), for servers that read files relative to their own folder; a relative path is taken from the runtime's working directory when it starts. One that is not a directory stops the runtime at start.",
      ),
    url: httpUrl().optional().describe('Remote MCP server URL (engine http).'),
    // Checked here: fetch refuses a bad name or value when each sandbox starts, failing every session of the class.
    headers: z
      .record(
        z.string().regex(HEADER_NAME, 'must be an HTTP header name (RFC 9110 token characters)'),
        z.string().regex(HEADER_VALUE, 'must not contain CR, LF or NUL, another control character, or one past U+00FF'),
      )
      .optional()
      .meta({ secret: true })
      .describe('Headers sent to url (engine http).'),
    expireSeconds: timerBounded(z.number().int().min(0), 1000)
      .default(300)
      .describe('Sandbox lifetime after its last session leaves.'),
    warmPool: z.number().int().min(0).max(1000).default(0).describe('Sandboxes kept started ahead of demand.'),
    startTimeoutSeconds: timerBounded(z.number().int().min(1), 1000)
      .default(30)
      .describe(
        'Time a stdio or http server may take to answer initialize: past it the start fails and the client is told the sandbox could not start (MCP clients give up on a request after 60 s). Raise it for servers that install themselves on first start (npx, uvx), or keep a warm pool.',
      ),
  })
  .superRefine((c, ctx) => {
    if (c.engine === 'stdio' && !c.command) ctx.addIssue({ code: 'custom', message: 'engine stdio needs command' });
    if (c.engine === 'http' && !c.url) ctx.addIssue({ code: 'custom', message: 'engine http needs url' });
    // The runtime would ignore them: a key left from another engine, or an API key put where it is never sent.
    for (const [key, engine] of Object.entries(ENGINE_OF_KEY)) {
      if (c[key as keyof typeof ENGINE_OF_KEY] === undefined || c.engine === engine) continue;
      ctx.addIssue({
        code: 'custom',
        path: [key],
        message: `engine ${c.engine} does not use ${key} (engine ${engine})`,
      });
    }
  });

/** Options of a runtime (`switchyard-runtime`). */
export const runtimeConfigSchema = z.object({
  runtimeId: hostIdentityField('Stable id of this runtime.'),
  schedulerUrl: httpUrl().describe('Base URL of a scheduler replica (or its Service) to dial.'),
  fallbackSchedulerUrls: z
    .array(httpUrl())
    .default([])
    .describe(
      'More scheduler replicas, for schedulers with no Service in front of them (a Service already spreads dials): a dial that fails moves on to the next, so a runtime whose replica died joins another.',
    ),
  joinToken: z.string().optional().meta({ secret: true }).describe('Token presented to the scheduler when joining.'),
  joinTokenFile: z
    .string()
    .optional()
    .describe(
      'File holding the join token (a mounted Secret); read again before each dial when it changed, so a rotated token needs no restart.',
    ),
  classes: z
    .record(
      z
        .string()
        .regex(
          IDENTITY_VALUE_PATTERN,
          'a class name: 1-128 characters from [A-Za-z0-9._:@-], as clients name it (X-Switchyard-Class)',
        ),
      runtimeClassSchema,
    )
    .refine((c) => Object.keys(c).length >= 1, 'needs at least 1 class')
    .refine((c) => Object.keys(c).length <= classesMax, `at most ${classesMax} classes`)
    .prefault({ demo: { engine: 'builtin' } })
    .describe('Sandbox classes this runtime serves: name → engine settings.'),
  sandboxesMax: z
    .number()
    .int()
    .min(1)
    .max(weightValueMax)
    .default(100)
    .describe('Most sandboxes alive at once (the idle-weight limit).'),
  sessionIdleMs: timerBounded(z.number().int().min(1))
    .default(1800000)
    .describe('Idle time after which a session is closed.'),
  warmPoolRefillDelayMs: timerBounded(z.number().int().min(0))
    .default(250)
    .describe(
      "Wait after a warm-pool sandbox is handed out before its replacement starts, so the start does not compete with the new session's first calls.",
    ),
  metadata: z
    .record(z.string(), z.string())
    .superRefine((m, ctx) => {
      for (const { path, message } of metadataProblems(m)) ctx.addIssue({ code: 'custom', message, path: [...path] });
    })
    .refine((m) => !Object.hasOwn(m, DRAINING_METADATA_KEY), {
      message: `${DRAINING_METADATA_KEY} is reserved: a runtime sets it when it drains`,
      path: [DRAINING_METADATA_KEY],
    })
    .default({})
    .describe(
      `Labels schedulers match affinity rules against: at most ${RUNTIME_LIMITS.metadataEntriesMax}, keys of 1-63 characters from [A-Za-z0-9._/-] other than \`__proto__\`, values of at most ${RUNTIME_LIMITS.metadataValueLengthMax} characters.`,
    ),
  version: z
    .string()
    .max(versionLengthMax)
    .refine(isRuntimeVersion, RUNTIME_VERSION_MESSAGE)
    .default('0.0.0')
    .describe(
      'Version reported to schedulers, a semantic version (e.g. 1.4.2 or 2.0.0-rc.1) that latest_version rules rank; schedulers refuse any other.',
    ),
  sidecarPort: z
    .number()
    .int()
    .min(0)
    .max(65535)
    .default(0)
    .describe('Port of the local runtime API for non-TypeScript code; 0 is off; binds 127.0.0.1 only.'),
  directListen: z
    .object({
      enabled: z.boolean().default(false).describe('Also serve /mcp on a port gateways may dial directly.'),
      host: z.string().default('0.0.0.0').describe('Address of the direct listener.'),
      port: z.number().int().min(0).max(65535).default(0).describe('Port of the direct listener (0 picks one).'),
      token: z
        .string()
        .optional()
        .meta({ secret: true })
        .describe('Bearer token gateways must present on it; one shorter than 16 characters is warned of at start.'),
      tokenFile: z
        .string()
        .optional()
        .describe(
          'File of bearer tokens gateways may present on it, one per line (a mounted Secret), besides token; read again when it changes, so during a rotation it accepts the old and the new token, and then only those still listed. Lines shorter than 16 characters are taken, with a warning naming the file at each read.',
        ),
      advertiseUrl: httpUrl()
        .max(addressLengthMax)
        .optional()
        .meta({ defaultText: 'http://<host>:<port>, an IPv6 host in brackets' })
        .describe(
          'Base URL gateways dial for the direct listener, e.g. http://<pod IP>:<port>; needed when host is 0.0.0.0 or ::, which no other machine can dial.',
        ),
      connectionsMax: connectionsMaxField(
        "Most connections the direct listener holds at once (gateways' requests and event streams, idle keep-alive ones); one more is closed unread, counted in connections_refused_total and warned of at most once per 10 s. Keep it above the event streams gateways hold open to this runtime, and raise it with the memory limit.",
      ),
      writeStallTimeoutMs: timerBounded(z.number().int().min(1000))
        .default(WRITE_STALL_TIMEOUT_MS_DEFAULT)
        .describe(
          "How long a connection's writes may wait with no byte taken by its peer before the direct listener closes it, ending the answer or event stream on it: HTTP/1.1 has no ping, so a gateway whose host vanished without a reset would hold a stream that keeps writing until the kernel's retransmission timeout, about 15 minutes. A reader that keeps taking bytes is kept. On Linux, a connection the kernel has retransmitted to for as long with no acknowledgement (a stream that writes only keep-alive comments, which never backs up) is closed too.",
        ),
    })
    .prefault({})
    .describe('Direct listener.'),
  metering: z
    .object({
      sink: z
        .enum(['log', 'redis', 'none'])
        .optional()
        .meta({ defaultText: 'redis when redisUrl is set, else log' })
        .describe(
          'Where sandbox lifecycle events (a start and a recycle of each sandbox, with its class, process, reason and duration) go: log writes each as an info line (event: metering), redis appends it to stream at redisUrl, none drops them (nothing then records what sandboxes ran, for billing or audit).',
        ),
      redisUrl: redisUrlField('Redis URL receiving sandbox lifecycle events (sink redis)'),
      stream: z.string().min(1).default('switchyard:metering').describe('Redis stream name of metering events.'),
      queueLengthMax: z
        .number()
        .int()
        .min(1)
        // About 1 KB an event: a bound no runtime's memory limit should be asked to hold.
        .max(1_000_000)
        .default(METERING_QUEUE_LENGTH_MAX_DEFAULT)
        .describe(
          'Most metering events a runtime holds (sink redis) while its Redis is unreachable or refuses writes for a passing reason (out of memory, loading, a failover): they are written once it takes them again, in the order they happened, each once. Past it the oldest are dropped, warned of as metering.queue_full (at once, then at most once per 10 s, with dropped counting them all). About 1 KB an event; events held by a runtime that is killed are lost.',
        ),
    })
    // A URL that the sink named would not write to is a config the operator did not mean: refused, not ignored.
    .superRefine((m, ctx) => {
      if (m.sink === 'redis' && !m.redisUrl) {
        ctx.addIssue({ code: 'custom', path: ['redisUrl'], message: 'sink redis needs redisUrl' });
      }
      if (m.sink !== undefined && m.sink !== 'redis' && m.redisUrl) {
        const message = `sink ${m.sink} writes nothing to redisUrl: unset redisUrl, or set sink redis`;
        ctx.addIssue({ code: 'custom', path: ['sink'], message });
      }
    })
    .prefault({})
    .describe('Metering.'),
  tunnel: z
    .object({
      pingIntervalMs: z
        .number()
        .int()
        .min(1)
        // A dial waits a ping interval and a ping timeout (as long again) for the scheduler, in one timer.
        .max(
          TUNNEL_PING_INTERVAL_MS_MAX,
          `at most ${TUNNEL_PING_INTERVAL_MS_MAX}: a dial waits twice this for the scheduler to answer, and Node.js runs a timer over ${TIMER_DELAY_MS_MAX} ms after 1 ms, so every dial would fail`,
        )
        .default(5000)
        .describe(
          'Interval of tunnel liveness pings; one unanswered for as long again ends the tunnel, which is then dialled again. Announced to the scheduler, which holds requests for a runtime whose connection went silent until the runtime must have found out too.',
        ),
      transport: z
        .enum(['auto', 'http2', 'websocket'])
        .default('auto')
        .describe(
          'How the tunnel carries HTTP/2: http2 straight on the upgraded connection (fastest), websocket inside WebSocket messages (for proxies that pass only WebSocket), auto tries http2 first and takes websocket when http2 is refused, or for 30 min after two http2 tunnels dropped before the scheduler spoke.',
        ),
    })
    .prefault({})
    .describe('Scheduler tunnel.'),
  health: z
    .object({
      // Optional, not defaulted: unset keeps `port: 0` meaning off, as it did before `enabled` existed.
      enabled: z
        .boolean()
        .optional()
        .meta({ defaultText: 'on when port is not 0' })
        .describe(
          'Serve the health listener: true with port 0 takes a free port (named on the ready line), false turns it off; unset, it is on when port is not 0.',
        ),
      host: z.string().default('0.0.0.0').describe('Address of the health listener.'),
      port: z
        .number()
        .int()
        .min(0)
        .max(65535)
        .default(0)
        .describe(
          'Port serving /healthz (the process answers), /readyz (the tunnel is up and the runtime not draining) and /metrics, for kubelet probes and Prometheus; 0 is off unless enabled is true, which takes a free port.',
        ),
    })
    .prefault({})
    .describe('Health listener.'),
  ...processConfigFields,
  drainDelayMs: processConfigFields.drainDelayMs.describe(
    'On SIGTERM, the longest time the runtime goes on serving the sessions it holds, while schedulers place no new sandbox here, before it closes its tunnel; it stops sooner once it holds no sandbox.',
  ),
});

export type RuntimeConfig = z.output<typeof runtimeConfigSchema>;

/** Whether the runtime serves its health listener: as `enabled` says, else when a port is named. */
export function healthListenerOn(health: RuntimeConfig['health']): boolean {
  return health.enabled ?? health.port > 0;
}
