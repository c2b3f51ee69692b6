// `switchyard up` as a real child process, in both modes: it prints the /mcp
// URL, real clients (the inspector CLI, an SDK v2 client) reach the demo and
// `everything` tools through it, `status` and `explain` agree with the
// scheduler API, and Ctrl-C (SIGINT) leaves no process behind — including
// the stdio sandboxes, which are grandchildren (or great-grandchildren).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  INSPECTOR_CLI,
  alive,
  descendants,
  killGroup,
  mcpUrlOf,
  runCli,
  spawnCli,
  until,
  type Running,
} from './support.ts';
import { spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

const MODES = [
  // In-process, the stdio sandboxes are the only children; in --processes mode the three
  // schedulers, two runtimes and the gateway are the children and the sandboxes grandchildren.
  { name: 'in-process cluster', args: [] as string[], components: 0, sandboxDepth: 1 },
  { name: 'one process per component (--processes)', args: ['--processes'], components: 6, sandboxDepth: 2 },
];

interface EpochInfo {
  replica: string;
  epoch: number | null;
  term: number;
  leader: { id: string; url: string } | null;
}

async function getJson<T>(url: string, init?: RequestInit): Promise<T> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5000) });
  return (await res.json()) as T;
}

function inspectorToolsList(url: string, ...options: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [INSPECTOR_CLI, '--cli', url, ...options, '--method', 'tools/list'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.once('error', reject);
    // The last output may still be in the pipes at exit; 'close' comes once they are read to the end
    // (bounded: a descendant that outlived the inspector may hold them open).
    child.once('exit', (code) => {
      clearTimeout(timer);
      const done = (): void => resolve({ code, stdout });
      const late = setTimeout(done, 2000);
      child.once('close', () => (clearTimeout(late), done()));
    });
  });
}

for (const mode of MODES) {
  describe(`switchyard up: ${mode.name}`, () => {
    let up: Running;
    let gatewayUrl = '';
    let schedulerUrl = '';
    let exitedCleanly = false;
    const clients: Client[] = [];

    before(async () => {
      up = spawnCli(['up', ...mode.args, '--gateway-port', '0', '--scheduler-port', '0']);
      const started = performance.now();
      gatewayUrl = await mcpUrlOf(up, 20_000);
      assert.ok(performance.now() - started < 20_000);
      schedulerUrl = /^scheduler\s+scheduler-0\s+(http:\/\/127\.0\.0\.1:\d+)/m.exec(up.stdout())![1]!;
    });

    after(async () => {
      await Promise.allSettled(clients.map((c) => c.close()));
      if (!exitedCleanly) killGroup(up.child);
    });

    it('prints the summary on stdout and progress on stderr', () => {
      assert.match(up.stdout(), /Switchyard is ready \([\d.]+ s\)\. MCP endpoint:/);
      // The .mcp.json form, where Streamable HTTP is "http".
      assert.match(up.stdout(), /"type": "http",\s+"url": "http:\/\/127\.0\.0\.1:\d+\/mcp"/);
      assert.match(up.stderr(), /every scheduler sees every runtime/);
      assert.doesNotMatch(up.stdout(), /every scheduler sees every runtime/);
    });

    it('prints a runtime join command naming every scheduler replica, so the runtime outlives any one', () => {
      const replicas = [...up.stdout().matchAll(/^scheduler\s+scheduler-\d\s+(http:\/\/\S+)/gm)].map((m) => m[1]);
      assert.equal(replicas.length, 3);
      const join = /^Join another runtime: npm run switchyard -- runtime join (.+) --token \S+$/m.exec(up.stdout());
      assert.equal(join?.[1], replicas.join(' '), up.stdout());
    });

    it('serves the demo tools to the inspector CLI', async () => {
      const { code, stdout } = await inspectorToolsList(gatewayUrl);
      assert.equal(code, 0);
      const names = (JSON.parse(stdout) as { tools: Array<{ name: string }> }).tools.map((t) => t.name).sort();
      assert.deepEqual(names, ['counter', 'echo', 'sleep', 'whoami']);
    });

    // The three ways the README gives to pick the class. Each inspector (and the sandbox it
    // makes start) waits mostly on process starts, and none touches another's: side by side.
    describe('the three ways to pick the class', { concurrency: true }, () => {
      for (const [how, url, options] of [
        ['?class=everything', (u: string) => `${u}?class=everything&process=ev-1`, []],
        ['the path form', (u: string) => `${u}/everything/ev-2`, ['--transport', 'http']],
        ['X-Switchyard-Class', (u: string) => u, ['--header', 'X-Switchyard-Class: everything']],
      ] as const) {
        it(`serves the reference server tools to the inspector CLI that asks with ${how}`, async () => {
          const { code, stdout } = await inspectorToolsList(url(gatewayUrl), ...options);
          assert.equal(code, 0, stdout);
          const names = (JSON.parse(stdout) as { tools: Array<{ name: string }> }).tools.map((t) => t.name);
          assert.ok(names.includes('get-sum') && !names.includes('whoami'), names.join(','));
        });
      }
    });

    // docs/operations.md's probes and metrics, as the deployed gateway answers them beside /mcp.
    it('answers /healthz, /readyz and /metrics on the gateway port', async () => {
      const base = gatewayUrl.replace(/\/mcp$/, '');
      for (const probe of ['/healthz', '/readyz']) {
        const res = await fetch(`${base}${probe}`, { signal: AbortSignal.timeout(5000) });
        assert.equal(res.status, 200, probe);
        assert.equal(((await res.json()) as { status: string }).status, probe === '/readyz' ? 'ready' : 'ok');
      }
      const metrics = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) });
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /^switchyard_gateway_\w+/m);
    });

    // Node's parser refuses it before the gateway sees it; a bare 431 leaves an MCP client nothing to show.
    it('answers headers past 16 KiB 431 with a JSON-RPC error, as the deployed gateway does', async () => {
      const res = await fetch(gatewayUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-padding': 'p'.repeat(20_000) },
        body: '{}',
        signal: AbortSignal.timeout(5000),
      });
      assert.equal(res.status, 431);
      const body = (await res.json()) as { error?: { message?: string; data?: { reason?: string } } };
      assert.equal(body.error?.data?.reason, 'header_too_large');
      assert.match(body.error?.message ?? '', /headers too large/i);
    });

    it('serves browser pages of this machine (any port) and answers any other Origin 403', async () => {
      const initialize = (origin: string) =>
        fetch(gatewayUrl, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', origin },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'initialize',
            params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'page', version: '1' } },
          }),
          signal: AbortSignal.timeout(5000),
        });
      for (const origin of ['http://localhost:6274', 'http://127.0.0.1:5173']) {
        const res = await initialize(origin);
        assert.equal(res.status, 200, origin);
        await res.body?.cancel();
      }
      const foreign = await initialize('http://rebound.example:6274');
      assert.equal(foreign.status, 403);
      await foreign.body?.cancel();
    });

    it('serves the reference server tools to an SDK v2 client that asks for class everything', async () => {
      const client = new Client({ name: 'cli-test', version: '1.0.0' });
      clients.push(client);
      const transport = new StreamableHTTPClientTransport(new URL(gatewayUrl), {
        requestInit: { headers: { 'X-Switchyard-Class': 'everything', 'X-Switchyard-Process': 'ev-1' } },
      });
      await client.connect(transport);
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('get-sum') && names.includes('get-tiny-image'), names.join(','));
      assert.ok(!names.includes('whoami'));
    });

    it('status prints the leader, epoch and runtimes that the scheduler API reports', async () => {
      // With a trailing slash, as a URL copied from a browser has.
      const { code, stdout } = await runCli(['status', '--scheduler', `${schedulerUrl}/`]);
      const api = await getJson<EpochInfo>(`${schedulerUrl}/api/epoch`);
      const list = await getJson<{ epoch: number; runtimes: Array<{ id: string; owner: string }> }>(
        `${schedulerUrl}/api/runtimes`,
      );
      assert.equal(code, 0);
      assert.match(stdout, new RegExp(`^leader: +${api.leader!.id} \\(${api.leader!.url}\\)$`, 'm'));
      assert.match(stdout, new RegExp(`^term: +${api.term}$`, 'm'));
      // Epochs advance while the command runs; the printed one lies between two API reads.
      const printed = Number(/^epoch: +(\d+)/m.exec(stdout)![1]);
      const later = (await getJson<EpochInfo>(`${schedulerUrl}/api/epoch`)).epoch!;
      assert.ok(printed >= 0 && printed <= later, `printed epoch ${printed}, API ${later}`);
      const rows = [...stdout.matchAll(/^(runtime-\d+) +available +(\S+)/gm)].map((m) => `${m[1]}@${m[2]}`);
      assert.deepEqual(rows.sort(), list.runtimes.map((r) => `${r.id}@${r.owner}`).sort());
      assert.equal(rows.length, 2);
    });

    it('explain names the stage that found a request unschedulable once, and exits 1', async () => {
      const { code, stdout } = await runCli([
        'explain',
        '--scheduler',
        schedulerUrl,
        '--class',
        'nosuch',
        '--process',
        'p1',
      ]);
      assert.equal(code, 1);
      const last = stdout.trimEnd().split('\n').at(-1)!;
      assert.match(last, /^→ unschedulable at (\w+): (?!\1:)/);
    });

    it('runtime join with a token the scheduler refuses exits 1 and says why, in a line, not JSON, as up does', async () => {
      const { code, stderr } = await runCli([
        'runtime',
        'join',
        schedulerUrl,
        '--token',
        'not-a-join-token',
        '--id',
        'cli-refused',
      ]);
      assert.equal(code, 1, stderr);
      assert.match(stderr, /^switchyard: http:\/\/127\.0\.0\.1:\d+ refused the join token \(check --token\)$/m);
      assert.doesNotMatch(stderr, /^\{/m);
      // `up` echoes the replica's warning with its reason, which its operator needs as much.
      await until('the refusal echoed by up', () => / runtime connect refused/.test(up.stderr()));
      assert.match(
        up.stderr(),
        /^ {2}\[[\w-]+\] runtime connect refused \(HTTP 401: invalid or missing join token\)$/m,
      );
    });

    it('explain ends with the runtime that POST /api/schedule chooses for the same request', async () => {
      const { code, stdout } = await runCli([
        'explain',
        '--scheduler',
        schedulerUrl,
        '--class',
        'demo',
        '--process',
        'p1',
      ]);
      const chosen = await getJson<{ ok: boolean; runtime: string }>(`${schedulerUrl}/api/schedule`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ class: 'demo', processId: 'p1' }),
      });
      assert.equal(code, 0);
      assert.ok(chosen.ok);
      const last = stdout.trimEnd().split('\n').at(-1)!;
      assert.match(last, new RegExp(`^→ ${chosen.runtime} \\(source: pipeline, epoch \\d+\\)$`));
      assert.match(stdout, /^STAGE +IN +OUT +CANDIDATES/m);
    });

    if (mode.components > 0) {
      it("starts every component with Node's module compile cache", () => {
        const components = descendants(up.child.pid!).filter((d) => d.depth === 1);
        assert.equal(components.length, mode.components);
        for (const c of components) {
          const env = readFileSync(`/proc/${c.pid}/environ`, 'utf8').split('\0');
          const dir = env.find((e) => e.startsWith('NODE_COMPILE_CACHE='))?.slice('NODE_COMPILE_CACHE='.length);
          assert.ok(dir, `${c.command} runs without NODE_COMPILE_CACHE`);
          // Made when the cache was enabled: one subdirectory per Node version and user.
          assert.ok(readdirSync(dir).length > 0, `${dir} was never made`);
        }
      });
    }

    it('stops every process it started on SIGINT and exits 0', async () => {
      const tree = descendants(up.child.pid!);
      const summary = tree.map((d) => `${d.pid}@${d.depth}: ${d.command.slice(0, 120)}`).join('\n');
      const sandboxes = tree.filter((d) => d.command.includes('server-everything'));
      // The process that kills the stdio servers if their runtime dies without closing them (named by its argv[0]).
      const reapers = tree.filter((d) => d.command.startsWith('switchyard-reaper '));
      const components = tree.filter((d) => d.depth === 1 && !sandboxes.includes(d) && !reapers.includes(d));
      assert.equal(components.length, mode.components, summary);
      assert.ok(sandboxes.length >= 1 && sandboxes.every((d) => d.depth === mode.sandboxDepth), summary);
      up.child.kill('SIGINT');
      const { code, signal } = await up.exited;
      exitedCleanly = true;
      assert.equal(signal, null);
      assert.equal(code, 0, up.stderr().slice(-2000));
      assert.match(up.stderr(), /switchyard: stopped/);
      // Reparented grandchildren may take a moment to be reaped; none may survive.
      await until('every descendant to be gone', () => tree.every((d) => !alive(d.pid)), 3000).catch(() => {
        assert.deepEqual(
          tree.filter((d) => alive(d.pid)),
          [],
          'processes left behind after SIGINT',
        );
      });
    });
  });
}

describe('switchyard up --processes: kill a scheduler', () => {
  let up: Running;
  after(() => killGroup(up.child));

  it("its runtime joins another replica (the others are its fallbacks), as the README's kill-one demo promises", async () => {
    up = spawnCli(['up', '--processes', '--gateway-port', '0', '--scheduler-port', '0']);
    await until('the summary on stdout', () => /^runtime\s+runtime-1/m.test(up.stdout()) || undefined);
    const urlOf = (name: string): string => new RegExp(`^scheduler\\s+${name}\\s+(\\S+)`, 'm').exec(up.stdout())![1]!;
    const victim = descendants(up.child.pid!).find(
      (d) => d.depth === 1 && d.command.includes('--replica-id scheduler-0'),
    );
    assert.ok(victim, 'scheduler-0 runs as a child');
    process.kill(victim.pid, 'SIGKILL');
    type Row = { id: string; available: boolean; owner: string };
    const moved = await until(
      'runtime-0 available through another replica',
      async () => {
        const res = await fetch(`${urlOf('scheduler-1')}/api/runtimes`, { signal: AbortSignal.timeout(2000) });
        const row = ((await res.json()) as { runtimes: Row[] }).runtimes.find((r) => r.id === 'runtime-0');
        return row?.available && row.owner !== 'scheduler-0' ? row : undefined;
      },
      20_000,
    );
    assert.match(moved.owner, /^scheduler-[12]$/);
  });
});

// docs/operations.md has operators export SWITCHYARD_API_TOKEN for `status`
// against their cluster; the local cluster's apps take their settings from
// flags, and would refuse a SWITCHYARD_* name they do not know.
describe('switchyard up --processes in a shell with SWITCHYARD_* variables', () => {
  let up: Running;
  after(() => killGroup(up.child));

  it('starts its components without them', async () => {
    const env = { SWITCHYARD_API_TOKEN: 'api-token-of-another-cluster', SWITCHYARD_LOG_LEVEL: 'debug' };
    up = spawnCli(['up', '--processes', '--gateway-port', '0', '--scheduler-port', '0'], env);
    await mcpUrlOf(up, 20_000);
    const components = descendants(up.child.pid!).filter((d) => d.depth === 1);
    assert.equal(components.length, 6);
    for (const c of components) {
      const names = readFileSync(`/proc/${c.pid}/environ`, 'utf8')
        .split('\0')
        .map((e) => e.split('=', 1)[0]!);
      assert.deepEqual(
        names.filter((n) => n.startsWith('SWITCHYARD_')),
        [],
        c.command,
      );
    }
  });
});
