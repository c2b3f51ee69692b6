// A runtime process's stdio servers do not outlive it, however it ends: a
// SIGKILL (an OOM kill, a node agent, `kill -9`) leaves no server running,
// even one that ignores stdin's end and SIGTERM or runs behind a shell, and
// a SIGTERM stops them before the runtime exits. The runtime runs as its own
// process with warm pools, so its servers start without a scheduler.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { alive, descendants } from '../../libs/sandbox/test/fixtures/children.ts';
import { spawnApp, until, type AppProcess } from '../support/processes.ts';

const unruly = fileURLToPath(new URL('../../libs/sandbox/test/fixtures/unruly-stdio-server.ts', import.meta.url));

/** Processes descended from `root` running the unruly server (not the shells starting it). */
function serversUnder(root: number): number[] {
  return descendants(root)
    .filter((d) => d.cmdline.split(' ')[1] === unruly)
    .map((d) => d.pid);
}

describe('a runtime process and its stdio servers', () => {
  let dir: string;
  let config: string;
  const seen = new Set<number>();
  const runtimes: AppProcess[] = [];
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-orphans-'));
    config = join(dir, 'runtime.json');
    const stubborn = { engine: 'stdio', command: process.execPath, args: [unruly, 'stubborn'] };
    writeFileSync(
      config,
      JSON.stringify({
        // Nothing listens there: the runtime dials on and on, its warm pools start anyway.
        schedulerUrl: 'http://127.0.0.1:9',
        joinToken: 'unused',
        classes: {
          stubborn: { ...stubborn, warmPool: 2 },
          // Through a shell that does not exec it, as npx and uvx run servers.
          wrapped: {
            engine: 'stdio',
            command: '/bin/sh',
            args: ['-c', `"${process.execPath}" "${unruly}" stubborn; :`],
            warmPool: 1,
          },
        },
      }),
    );
  });
  after(async () => {
    await Promise.all(runtimes.map((r) => r.stop(1000)));
    for (const pid of seen) if (alive(pid)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  /** Starts a runtime and waits for its three warm servers. */
  async function runtimeWithServers(name: string) {
    const runtime = await spawnApp('runtime', name, ['--config', config, '--runtime-id', name]);
    runtimes.push(runtime);
    const servers = await until('three servers started', () => {
      const found = serversUnder(runtime.pid);
      return found.length === 3 && found;
    });
    for (const pid of servers) seen.add(pid);
    return { runtime, servers };
  }

  it('SIGKILL: no server outlives it, though they ignore stdin EOF and SIGTERM', async () => {
    const { runtime, servers } = await runtimeWithServers('orphans-kill');
    runtime.signal('SIGKILL');
    await runtime.exited;
    await until('its servers gone', () => servers.every((pid) => !alive(pid)), 10_000);
  });

  it('SIGTERM: its servers are gone by the time it exits', async () => {
    const { runtime, servers } = await runtimeWithServers('orphans-term');
    runtime.signal('SIGTERM');
    const { code } = await runtime.exited;
    assert.equal(code, 0);
    assert.deepEqual(
      servers.filter((pid) => alive(pid)),
      [],
    );
  });
});
