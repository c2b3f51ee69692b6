// The three apps as an operator starts them with a config they cannot use:
// each exits 2 at once and says, under its own name, what is wrong (every
// problem, one per line, no stack) instead of starting and failing later.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileCacheEnv } from '../support/processes.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function run(
  app: 'scheduler' | 'gateway' | 'runtime',
  args: readonly string[],
  env: Record<string, string | undefined> = process.env,
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve, reject) => {
    // Some twenty app starts, CPU-bound: through the compile cache, all but the first skip the type stripper.
    const child = spawn(process.execPath, [`${ROOT}apps/${app}/src/main.ts`, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...compileCacheEnv(), ...env },
    });
    let stderr = '';
    let stdout = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('error', reject);
    // The last output may still be in the pipes at exit; 'close' comes once they are read to the end
    // (bounded: a descendant that outlived the app may hold them open).
    child.once('exit', (code) => {
      clearTimeout(timer);
      const done = (): void => resolve({ code, stderr, stdout });
      const late = setTimeout(done, 2000);
      child.once('close', () => (clearTimeout(late), done()));
    });
  });
}

const NO_STACK = /^\s+at /m;

describe('apps started with an unusable config', () => {
  for (const app of ['scheduler', 'gateway', 'runtime'] as const) {
    it(`switchyard-${app} lists every problem under its name and exits 2`, async () => {
      const { code, stderr } = await run(app, ['--bogus', '1', '--log-level', 'loud']);
      assert.equal(code, 2, stderr);
      assert.match(stderr, new RegExp(`^switchyard-${app}: invalid configuration:$`, 'm'));
      assert.match(stderr, /^ {2}- unknown flag --bogus$/m);
      assert.doesNotMatch(stderr, NO_STACK);
    });
  }

  it('a kubernetes-lease scheduler outside a pod and without a kubeconfig says which key it needs', async () => {
    const env = { ...process.env, KUBERNETES_SERVICE_HOST: undefined };
    const { code, stderr } = await run('scheduler', ['--port', '0', '--election.backend', 'kubernetes'], env);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- election\.kubeconfig: required outside a Kubernetes pod/m);
    assert.doesNotMatch(stderr, NO_STACK);
  });

  it('a file-lease scheduler without its lease file says so', async () => {
    const { code, stderr } = await run('scheduler', ['--port', '0', '--election.backend', 'file']);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- election\.leaseFile: required with the file backend$/m);
  });
});

describe('a runtime whose join token file holds no token', () => {
  // In a pod: a Secret whose key is not the chart's joinToken.key mounts no such file.
  it('names the file and what it needs instead of asking for a setting it was given', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-join-file-'));
    try {
      for (const file of [join(dir, 'missing'), join(dir, 'empty')]) {
        if (file.endsWith('empty')) writeFileSync(file, '\n');
        const { code, stdout } = await run('runtime', [
          '--scheduler-url',
          'http://127.0.0.1:1',
          '--join-token-file',
          file,
        ]);
        assert.equal(code, 1, stdout);
        const fatal = stdout.split('\n').find((line) => line.includes('"level":60'));
        assert.ok(fatal, stdout);
        assert.ok(fatal.includes(`joinTokenFile ${file} holds no join token`), fatal);
        assert.match(fatal, /joinToken\.key/);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a scheduler whose advertiseUrl is longer than a runtime state carries', () => {
  it('refuses to start, naming the key, instead of having the collects of its runtimes refused', async () => {
    // The URL is every runtime's ownerUrl in the epochs, which hold it to 256 characters.
    const { code, stderr } = await run('scheduler', [
      ...['--port', '0', '--advertise-url', `http://${'s'.repeat(250)}:7070`],
    ]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- advertiseUrl: .*256/m);
  });
});

describe('a scheduler given election timing its elector refuses', () => {
  it('says which keys, instead of crashing at start naming a setting it has none of', async () => {
    // Within leaseDurationMs > renewDeadlineMs > retryPeriodMs × jitterFactor, but a lease attempt may take a
    // retry period, which a leader must finish within its renew deadline.
    const { code, stderr } = await run('scheduler', [
      ...['--port', '0', '--election.lease-duration-ms', '15000', '--election.renew-deadline-ms', '2500'],
      ...['--election.retry-period-ms', '3000', '--election.jitter-factor', '0.5'],
    ]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- election\.retryPeriodMs: at most renewDeadlineMs \(2500\)/m);
    assert.doesNotMatch(stderr, /attemptTimeoutMs/);
    assert.doesNotMatch(stderr, NO_STACK);
  });
});

describe('a scheduler given runtime state limits it cannot hold', () => {
  it('refuses to start, naming each key and what it may be', async () => {
    const { code, stderr } = await run('scheduler', [
      ...['--port', '0', '--runtime-state.processes-max', '0', '--runtime-state.threads-max', '10000001'],
    ]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- runtimeState\.processesMax: .*1\b/m);
    assert.match(stderr, /^ {2}- runtimeState\.threadsMax: .*10000000/m);
    assert.doesNotMatch(stderr, NO_STACK);
  });

  it('refuses a count that is not a whole number, and one past the protocol ceiling', async () => {
    const { code, stderr } = await run('scheduler', [
      ...['--port', '0', '--runtime-state.processes-max', '1000001', '--runtime-state.threads-max', '2.5'],
    ]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- runtimeState\.processesMax: .*1000000/m);
    assert.match(stderr, /^ {2}- runtimeState\.threadsMax: .*expected int\b/m);
  });

  it("prints the defaults: the reference runtime's own limits", async () => {
    const { code, stdout, stderr } = await run('scheduler', ['--port', '0', '--print-config']);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^runtimeState:\n {2}processesMax: 100000\n {2}threadsMax: 1000000$/m);
  });
});

describe('a runtime asked to print its config', () => {
  it('redacts the environment of a stdio class, where MCP servers take their API keys', async () => {
    const classes = { gh: { engine: 'stdio', command: 'mcp-github', env: { GITHUB_TOKEN: 'ghp-secret-0123' } } };
    const { code, stdout, stderr } = await run('runtime', [
      ...['--scheduler-url', 'http://127.0.0.1:1', '--join-token', 'a-join-token-0123456789abcdef'],
      ...['--classes', JSON.stringify(classes), '--print-config'],
    ]);
    assert.equal(code, 0, stderr);
    assert.doesNotMatch(stdout, /ghp-secret-0123/);
    assert.match(stdout, /^ {4}env: "\[redacted\]"$/m);
    assert.match(stdout, /^ {4}command: mcp-github$/m, 'the rest of the class is shown');
  });

  it('redacts the credentials an http class URL carries, in its user info or its query', async () => {
    const classes = {
      remote: { engine: 'http', url: 'https://bob:url-pass-0123@mcp.example.com/mcp?api_key=url-key-0123&v=2' },
    };
    const { code, stdout, stderr } = await run('runtime', [
      ...['--scheduler-url', 'http://127.0.0.1:1', '--join-token', 'a-join-token-0123456789abcdef'],
      ...['--classes', JSON.stringify(classes), '--print-config'],
    ]);
    assert.equal(code, 0, stderr);
    assert.doesNotMatch(stdout, /url-pass-0123|url-key-0123|bob/);
    assert.match(
      stdout,
      /^ {4}url: https:\/\/\[redacted\]@mcp\.example\.com\/mcp\?api_key=\[redacted\]&v=\[redacted\]$/m,
    );
  });
});

describe('a gateway given auth.classScopes', () => {
  const gateway = ['--port', '0', '--schedulers', 'http://127.0.0.1:1'];
  const classes = ['--auth.class-scopes', JSON.stringify({ 'prod-db': ['db:read', 'db:write'] })];

  it('refuses them at start outside auth mode jwt, whose tokens carry no scopes', async () => {
    const { code, stderr } = await run('gateway', [...gateway, ...classes]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- auth\.classScopes: needs mode jwt/m);
    assert.doesNotMatch(stderr, NO_STACK);
  });

  it('prints them with its config', async () => {
    const jwt = ['--auth.mode', 'jwt', '--auth.jwks-url', 'https://login.example.com/jwks'];
    const { code, stdout, stderr } = await run('gateway', [...gateway, ...jwt, ...classes, '--print-config']);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^ {2}classScopes:\n {4}prod-db:\n {6}- db:read\n {6}- db:write$/m);
  });
});

describe('a gateway given auth.toolScopes', () => {
  const gateway = ['--port', '0', '--schedulers', 'http://127.0.0.1:1'];
  const tools = ['--auth.tool-scopes', JSON.stringify({ delete_repo: ['repo:admin'] })];

  it('refuses them at start outside auth mode jwt, whose tokens carry no scopes', async () => {
    const { code, stderr } = await run('gateway', [...gateway, ...tools]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- auth\.toolScopes: needs mode jwt/m);
    assert.doesNotMatch(stderr, NO_STACK);
  });

  it('prints them with its config', async () => {
    const jwt = ['--auth.mode', 'jwt', '--auth.jwks-url', 'https://login.example.com/jwks'];
    const { code, stdout, stderr } = await run('gateway', [...gateway, ...jwt, ...tools, '--print-config']);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /^ {2}toolScopes:\n {4}delete_repo:\n {6}- repo:admin$/m);
  });
});

describe('apps given a URL without http:// or https://', () => {
  // `scheduler:7070` is a valid URL of the scheme `scheduler:`: taken as such, the runtime crashed
  // at its first dial and the gateway started and failed every request.
  const cases = [
    {
      app: 'runtime' as const,
      args: [
        ...['--scheduler-url', 'scheduler:7070', '--join-token', 'a-join-token-0123456789abcdef'],
        ...['--fallback-scheduler-urls', 'ftp://scheduler-1:7070'],
        ...['--classes', JSON.stringify({ remote: { engine: 'http', url: 'mcp.example.com:443/mcp' } })],
      ],
      keys: ['schedulerUrl', 'fallbackSchedulerUrls\\.0', 'classes\\.remote\\.url'],
    },
    {
      app: 'gateway' as const,
      args: ['--port', '0', '--schedulers', 'http://127.0.0.1:1,scheduler:7070'],
      keys: ['schedulers\\.1'],
    },
    {
      app: 'scheduler' as const,
      args: ['--port', '0', '--advertise-url', 'scheduler-0.scheduler:7070'],
      keys: ['advertiseUrl'],
    },
  ];
  for (const { app, args, keys } of cases) {
    it(`switchyard-${app} refuses it at start, naming the key`, async () => {
      const { code, stderr } = await run(app, args);
      assert.equal(code, 2, stderr);
      for (const key of keys) {
        assert.match(stderr, new RegExp(`^ {2}- ${key}: must be an http:// or https:// URL`, 'm'));
      }
      assert.doesNotMatch(stderr, NO_STACK);
    });
  }
});

describe('apps whose port is taken', () => {
  const ARGS = {
    gateway: (port: number) => ['--host', '127.0.0.1', '--port', String(port), '--schedulers', 'http://127.0.0.1:1'],
    scheduler: (port: number) => ['--host', '127.0.0.1', '--port', String(port)],
    runtime: (port: number) => [
      ...['--scheduler-url', 'http://127.0.0.1:1', '--join-token', 'a-join-token-0123456789abcdef'],
      ...['--sidecar-port', String(port)],
    ],
  };
  for (const app of ['scheduler', 'gateway', 'runtime'] as const) {
    it(`switchyard-${app} says which address is taken in one line and exits 1`, async () => {
      const holder = net.createServer().listen(0, '127.0.0.1');
      await once(holder, 'listening');
      try {
        const { port } = holder.address() as net.AddressInfo;
        const { code, stderr } = await run(app, ARGS[app](port));
        assert.equal(code, 1, stderr);
        assert.match(
          stderr,
          new RegExp(`^switchyard-${app}: cannot listen on 127\\.0\\.0\\.1:${port}: the port is already in use$`, 'm'),
        );
        assert.doesNotMatch(stderr, NO_STACK);
      } finally {
        holder.close();
      }
    });
  }
});

describe('a runtime asked for a direct listener without a token', () => {
  it('refuses to start when neither directListen.token nor its token file lists one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-direct-'));
    try {
      const file = join(dir, 'tokens');
      writeFileSync(file, '# rotated out\n\n');
      const { code, stdout } = await run('runtime', [
        ...['--scheduler-url', 'http://127.0.0.1:1', '--join-token', 'a-join-token-0123456789abcdef'],
        ...['--direct-listen.enabled', 'true', '--direct-listen.port', '0', '--direct-listen.token-file', file],
      ]);
      assert.equal(code, 1, stdout);
      assert.match(
        stdout,
        /directListen\.enabled requires directListen\.token or a directListen\.tokenFile listing one/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a runtime configured past what schedulers accept of a runtime', () => {
  it('refuses to start and names each key, instead of failing every dial or crashing later', async () => {
    const dial = ['--scheduler-url', 'http://127.0.0.1:1', '--join-token', 'a-join-token-0123456789abcdef'];
    const cases = [
      {
        args: [
          ...['--metadata', JSON.stringify({ 'zone name': 'eu-1', long: 'x'.repeat(257) })],
          ...['--version', 'v'.repeat(65), '--classes', '{}', '--sandboxes-max', '2000000000000'],
          ...['--direct-listen.advertise-url', `http://${'h'.repeat(250)}:8080`],
        ],
        problems: [
          /^ {2}- metadata\.zone name: must be 1-63 characters from \[A-Za-z0-9\._\/-\]/m,
          /^ {2}- metadata\.long: .*256/m,
          /^ {2}- version: .*64/m,
          /^ {2}- classes: needs at least 1 class/m,
          /^ {2}- sandboxesMax: .*1000000000000/m,
          /^ {2}- directListen\.advertiseUrl: .*256/m,
        ],
      },
      {
        args: ['--metadata', JSON.stringify({ 'switchyard/draining': 'true' })],
        problems: [/^ {2}- metadata\.switchyard\/draining: switchyard\/draining is reserved/m],
      },
      {
        // The config's map type would leave it out without a word.
        args: ['--metadata', '{"zone":"eu-1","__proto__":"x"}'],
        problems: [/^ {2}- metadata\.__proto__: '__proto__' cannot be a key/m],
      },
      {
        // Schedulers' latest_version rules would skip it without a word.
        args: ['--version', 'latest'],
        problems: [/^ {2}- version: must be a semantic version such as 1\.4\.2/m],
      },
    ];
    for (const { args, problems } of cases) {
      const { code, stderr } = await run('runtime', [...dial, ...args]);
      assert.equal(code, 2, stderr);
      assert.match(stderr, /^switchyard-runtime: invalid configuration:$/m);
      for (const problem of problems) assert.match(stderr, problem);
      assert.doesNotMatch(stderr, NO_STACK);
    }
  });
});

describe('apps given a time longer than a timer holds', () => {
  // Node.js runs a timer of more than 2^31 - 1 ms (24.8 days) after 1 ms: a session idle time of
  // 30 days would close every session at once. Each key is set one past the longest delay.
  const over = String(2 ** 31);
  const KEYS = {
    scheduler: {
      args: ['--port', '0'],
      keys: [
        'drainDelayMs',
        'election.leaseDurationMs',
        'election.renewDeadlineMs',
        'election.retryPeriodMs',
        'tunnel.pingIntervalMs',
        'gatewayPingIntervalMs',
        'writeStallTimeoutMs',
        'epoch.cycleIntervalMs',
        'epoch.cycleTimeoutMs',
        'epoch.staleAfterMs',
        'epoch.forgetAfterMs',
      ],
    },
    gateway: {
      args: ['--port', '0', '--schedulers', 'http://127.0.0.1:1'],
      keys: [
        'drainDelayMs',
        'keepAliveTimeoutMs',
        'eventStreamPingIntervalMs',
        'upstreamCheckIntervalMs',
        'writeStallTimeoutMs',
        'idleTimeoutMs',
      ],
    },
    runtime: {
      args: ['--scheduler-url', 'http://127.0.0.1:1', '--join-token', 'a-join-token-0123456789abcdef'],
      keys: [
        'drainDelayMs',
        'sessionIdleMs',
        'warmPoolRefillDelayMs',
        'tunnel.pingIntervalMs',
        'directListen.writeStallTimeoutMs',
      ],
    },
  };
  const flagOf = (key: string): string => `--${key.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase()}`;
  for (const app of ['scheduler', 'gateway', 'runtime'] as const) {
    it(`switchyard-${app} refuses each at start, naming the key`, async () => {
      const { args, keys } = KEYS[app];
      const { code, stderr } = await run(app, [...args, ...keys.flatMap((key) => [flagOf(key), over])]);
      assert.equal(code, 2, stderr);
      for (const key of keys) {
        assert.match(stderr, new RegExp(`^ {2}- ${key.replaceAll('.', '\\.')}: .*2147483647`, 'm'));
      }
    });
  }

  it('switchyard-scheduler refuses a retry period that jitter stretches past what a timer holds', async () => {
    // Within leaseDurationMs > renewDeadlineMs > retryPeriodMs × jitterFactor, yet a candidate waits up to
    // retryPeriodMs × (1 + jitterFactor): 3.3e9 ms here, which Node.js would run after 1 ms.
    const { code, stderr } = await run('scheduler', [
      ...['--port', '0', '--election.lease-duration-ms', '2100000000'],
      ...['--election.renew-deadline-ms', '2000000000', '--election.retry-period-ms', '1500000000'],
    ]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- election\.retryPeriodMs: .*retryPeriodMs × \(1 \+ jitterFactor\).*2147483647/m);
    assert.doesNotMatch(stderr, NO_STACK);
  });

  it('switchyard-runtime refuses a tunnel ping interval whose dial timeout (twice it) a timer cannot hold', async () => {
    // A dial waits a ping interval and a ping timeout (as long again) for the scheduler: past 2^31 - 1 ms
    // together, every dial would time out after 1 ms and the runtime would never join.
    const { code, stderr } = await run('runtime', [
      ...['--scheduler-url', 'http://127.0.0.1:1', '--join-token', 'a-join-token-0123456789abcdef'],
      ...['--tunnel.ping-interval-ms', String(2 ** 30)],
    ]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- tunnel\.pingIntervalMs: .*1073741823/m);
  });

  it('switchyard-runtime refuses a class whose sandboxes would expire at once', async () => {
    const { code, stderr } = await run('runtime', [
      ...['--scheduler-url', 'http://127.0.0.1:1', '--join-token', 'a-join-token-0123456789abcdef'],
      ...['--classes', JSON.stringify({ demo: { engine: 'builtin', expireSeconds: Math.ceil(2 ** 31 / 1000) } })],
    ]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^ {2}- classes\.demo\.expireSeconds: .*2147483\b/m);
  });
});
