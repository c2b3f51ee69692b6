// `switchyard runtime join --config <file>`: serves the classes of a runtime
// config file, checked as the runtime app checks it, in place of the default
// demo class or beside the --class ones; a file it cannot serve as given is
// refused before any dial, saying why.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { killGroup, runCli, spawnCli, startOneReplica, until, type Running } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';
/** Never dialled: each of these runs is refused before it dials. */
const DOWN = 'http://127.0.0.1:1';
const SERVER = fileURLToPath(new URL('./fixtures/reading-server.ts', import.meta.url));

const dir = mkdtempSync(join(tmpdir(), 'join-config-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A config file `name` holding `config` (as JSON, which YAML reads too); its path. */
function configFile(name: string, config: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(config));
  return path;
}

/** The reading server's own folder, with the data file it reads relative to it. */
const serverDir = join(dir, 'reading-server');
mkdirSync(join(serverDir, 'data'), { recursive: true });
writeFileSync(join(serverDir, 'data/greeting.txt'), 'hello from the data folder');
const FILES_CLASS = { engine: 'stdio', command: process.execPath, args: [SERVER], cwd: serverDir };

/** The classes `replica`'s latest epoch lists for runtime `id`, once it lists the runtime as available. */
async function classesOf(replica: SchedulerReplica, id: string): Promise<string[] | undefined> {
  const answer = (await (await fetch(`${replica.url}/api/runtimes`)).json()) as {
    runtimes: { id: string; available: boolean; classes: string[] }[];
  };
  const runtime = answer.runtimes.find((r) => r.id === id && r.available);
  return runtime && [...runtime.classes].sort();
}

describe('switchyard runtime join --config, with a scheduler', () => {
  let replica: SchedulerReplica;
  let join: Running | undefined;
  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
  });
  after(async () => {
    if (join) killGroup(join.child);
    await replica?.close();
  });

  /** Starts the join of `args` as runtime `id`, and waits until it says it joined. */
  async function joined(id: string, args: readonly string[]): Promise<Running> {
    join = spawnCli(['runtime', 'join', replica.url, '--token', JOIN_TOKEN, '--id', id, ...args]);
    await until('the joined line', () => {
      if (join!.child.exitCode !== null) throw new Error(`runtime join exited:\n${join!.stderr()}`);
      return join!.stderr().includes(`runtime ${id} joined ${replica.url}`);
    });
    return join;
  }

  async function stopped(running: Running): Promise<void> {
    running.child.kill('SIGINT');
    assert.equal((await running.exited).code, 0, running.stderr());
    join = undefined;
  }

  it("serves the file's stdio class, whose server reads a file from its cwd, through the scheduler's proxy", async () => {
    const running = await joined('rt-files', [
      '--config',
      configFile('files.json', { classes: { files: FILES_CLASS } }),
    ]);
    assert.deepEqual(await until('the runtime listed', () => classesOf(replica, 'rt-files')), ['files']);
    const client = new Client({ name: 'join-config-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${replica.url}/api/proxy/rt-files/mcp`), {
      requestInit: { headers: { 'X-Switchyard-Class': 'files', 'X-Switchyard-Process': 'p-files' } },
    });
    try {
      await client.connect(transport);
      const result = await client.callTool({ name: 'greeting', arguments: {} });
      assert.deepEqual(result.content, [{ type: 'text', text: 'hello from the data folder' }]);
    } finally {
      await client.close();
    }
    await stopped(running);
  });

  it('serves the classes of --class beside those of the file', async () => {
    const config = configFile('beside.json', { classes: { files: FILES_CLASS } });
    const running = await joined('rt-beside', ['--config', config, '--class', 'demo']);
    assert.deepEqual(await until('the runtime listed', () => classesOf(replica, 'rt-beside')), ['demo', 'files']);
    await stopped(running);
  });

  it("says which class's server failed to start, and what it wrote to stderr before it exited", async () => {
    const failing = {
      engine: 'stdio',
      command: process.execPath,
      args: ['-e', 'console.error("MY_API_KEY is not set"); process.exit(3)'],
    };
    const running = await joined('rt-failing', [
      '--config',
      configFile('failing.json', { classes: { files: FILES_CLASS, failing } }),
    ]);
    await until('the runtime listed', () => classesOf(replica, 'rt-failing'));
    const answer = await fetch(`${replica.url}/api/proxy/rt-failing/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'x-switchyard-class': 'failing',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      }),
    });
    assert.equal(answer.status, 502);
    const line = await until('the start failed line', () =>
      running
        .stderr()
        .split('\n')
        .find((l) => l.includes('start failed')),
    );
    assert.match(line, /class failing/);
    assert.match(line, /exited with code 3/);
    assert.match(line, /MY_API_KEY is not set/);
    await stopped(running);
  });
});

describe('switchyard runtime join --config, a file it cannot serve', () => {
  const joinWith = (...args: string[]) => runCli(['runtime', 'join', DOWN, '--token', JOIN_TOKEN, ...args]);

  it('refuses a file that cannot be read, saying why, and exits 2', async () => {
    const missing = join(dir, 'missing.yaml');
    const { code, stderr } = await joinWith('--config', missing);
    assert.equal(code, 2, stderr);
    assert.match(stderr, new RegExp(`^switchyard: --config ${missing} cannot be read \\(no such file\\)$`, 'm'));
    assert.doesNotMatch(stderr, /dialling/);
  });

  it("refuses a file the runtime app would refuse, with the app's own problems, and exits 2", async () => {
    const config = configFile('bad.json', { classes: { tools: { engine: 'stdio', url: 'http://127.0.0.1:9/mcp' } } });
    const { code, stderr } = await joinWith('--config', config);
    assert.equal(code, 2, stderr);
    assert.match(stderr, new RegExp(`^switchyard: --config ${config}: invalid configuration:$`, 'm'));
    assert.match(stderr, /^ {2}- classes\.tools: engine stdio needs command /m);
    assert.match(stderr, /^ {2}- classes\.tools\.url: engine stdio does not use url \(engine http\) /m);
    assert.doesNotMatch(stderr, /dialling/);
  });

  it('refuses a class whose cwd is no directory, naming the class and the path', async () => {
    const cwd = join(dir, 'no-such-dir');
    const config = configFile('no-dir.json', { classes: { files: { ...FILES_CLASS, cwd } } });
    const { code, stderr } = await joinWith('--config', config);
    assert.equal(code, 2, stderr);
    assert.ok(
      stderr.includes(`  - classes.files.cwd: ${cwd} does not exist: class files runs its server there`),
      stderr,
    );
  });

  it('refuses a file that sets what join takes from its command line, naming those keys', async () => {
    const config = configFile('app.json', {
      runtimeId: 'rt-9',
      schedulerUrl: 'http://127.0.0.1:7070',
      joinToken: 'file-token-0123456789',
      classes: { files: FILES_CLASS },
    });
    const { code, stderr } = await joinWith('--config', config);
    assert.equal(code, 2, stderr);
    assert.match(
      stderr,
      new RegExp(
        `^switchyard: --config ${config} sets runtimeId, schedulerUrl, joinToken: runtime join takes only classes from a config file`,
        'm',
      ),
    );
    assert.ok(!stderr.includes('file-token-0123456789'), 'the values are not shown');
  });

  it('refuses a file that names no classes', async () => {
    const { code, stderr } = await joinWith('--config', configFile('none.json', {}));
    assert.equal(code, 2, stderr);
    assert.match(stderr, /names no classes/);
  });

  it('refuses a class of the file that --class names too', async () => {
    const config = configFile('clash.json', { classes: { demo: { engine: 'builtin' }, files: FILES_CLASS } });
    const { code, stderr } = await joinWith('--config', config, '--class', 'demo');
    assert.equal(code, 2, stderr);
    assert.match(stderr, new RegExp(`^switchyard: class demo is given by --class and by --config ${config}`, 'm'));
  });
});
