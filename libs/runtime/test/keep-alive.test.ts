// A runtime node must outlive its scheduler: with no listener open and the
// tunnel down, only the node's own handle keeps the process alive between two
// dial attempts. Checked in a child process, since what is under test is
// whether the process exits.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A loopback port nothing listens on: a privileged port no test binds, not one just released, which a
 * test running alongside may take meanwhile.
 */
const DEAD_PORT = 1;

function script(port: number, closeAfterMs: number | undefined): string {
  return `
    import { startRuntimeNode } from '@switchyard/runtime';
    import { createMetrics } from '@switchyard/service';
    const quiet = { debug() {}, info() {}, warn() {}, error() {} };
    const node = await startRuntimeNode({
      runtimeId: 'r0', schedulerUrl: 'http://127.0.0.1:${port}', joinToken: 'token-0123456789',
      classes: { demo: { engine: 'builtin' } }, sandboxesMax: 2, sessionIdleMs: 60000,
      tunnelPingIntervalMs: 300, logger: quiet, metrics: createMetrics('runtime'),
    });
    ${closeAfterMs === undefined ? '' : `setTimeout(() => void node.close(), ${closeAfterMs}).unref();`}
    process.stdout.write('started\\n');
  `;
}

const cases = [
  { name: 'keeps the process alive while its scheduler is unreachable', closeAfterMs: undefined, alive: true },
  { name: 'lets the process exit by itself once closed', closeAfterMs: 200, alive: false },
];

describe('runtime node process lifetime', () => {
  for (const c of cases) {
    it(c.name, async () => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script(DEAD_PORT, c.closeAfterMs)], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        // Timed from the node's start, not the spawn: loading the modules takes seconds on a busy machine.
        const started = once(child.stdout, 'data');
        await Promise.race([started, exited]);
        // Long enough for several failed dials (250 ms, 500 ms, 1 s backoff) and for close() to finish.
        const outcome = await Promise.race([
          exited.then((code) => ({ code })),
          sleep(3000).then(() => 'running' as const),
        ]);
        if (c.alive) assert.equal(outcome, 'running', `the process exited: ${JSON.stringify(outcome)} ${stderr}`);
        else assert.deepEqual(outcome, { code: 0 }, stderr);
      } finally {
        child.kill('SIGKILL');
        await exited;
      }
    });
  }
});
