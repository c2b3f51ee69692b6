// `switchyard up --processes` as a terminal signals it: Ctrl-C reaches the
// whole foreground process group, a closed terminal sends SIGHUP, and `up`
// itself may be killed outright. Each component must get one graceful
// shutdown (its `stopped` line, exit 0, never "second signal") and none may
// outlive `up`. Each `up` here is spawned detached, so it leads its own
// process group as a shell's foreground job does.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { alive, descendants, killGroup, mcpUrlOf, spawnCli, until, type Descendant, type Running } from './support.ts';

const COMPONENTS = ['scheduler-0', 'scheduler-1', 'scheduler-2', 'runtime-0', 'runtime-1', 'gateway'];

async function startUp(): Promise<{ up: Running; components: Descendant[] }> {
  const up = spawnCli(['up', '--processes', '--gateway-port', '0', '--scheduler-port', '0', '--log-level', 'info']);
  await mcpUrlOf(up, 30_000);
  const components = descendants(up.child.pid!).filter((d) => d.depth === 1);
  assert.equal(components.length, COMPONENTS.length, components.map((c) => c.command).join('\n'));
  return { up, components };
}

async function assertAllGone(components: readonly Descendant[], what: string, timeoutMs = 15_000): Promise<void> {
  await until(`every component to be gone ${what}`, () => components.every((c) => !alive(c.pid)), timeoutMs).catch(() =>
    assert.deepEqual(
      components.filter((c) => alive(c.pid)),
      [],
      `components left behind ${what}`,
    ),
  );
}

/** The stop was graceful for every component: its `stopped` line, no forced exit, `up` itself 0. */
async function assertGracefulStop(up: Running, components: readonly Descendant[]): Promise<void> {
  const { code, signal } = await up.exited;
  const stderr = up.stderr();
  assert.equal(signal, null, stderr.slice(-3000));
  assert.equal(code, 0, stderr.slice(-3000));
  assert.doesNotMatch(stderr, /second signal/);
  assert.doesNotMatch(stderr, /did not stop cleanly/);
  for (const name of COMPONENTS) assert.match(stderr, new RegExp(`^ {2}\\[${name}\\] stopped$`, 'm'), name);
  assert.match(stderr, /^switchyard: stopped$/m);
  await assertAllGone(components, 'after up exited');
}

describe('switchyard up --processes: Ctrl-C in a terminal (SIGINT to the whole process group)', () => {
  let up: Running;
  let components: Descendant[] = [];
  after(() => killGroup(up.child));

  it("echoes the components' info lines with --log-level info", async () => {
    ({ up, components } = await startUp());
    for (const name of COMPONENTS) assert.match(up.stderr(), new RegExp(`^ {2}\\[${name}\\] ready$`, 'm'), name);
  });

  it('gives every component one graceful shutdown, and exits 0', async () => {
    process.kill(-up.child.pid!, 'SIGINT');
    await assertGracefulStop(up, components);
  });
});

describe('switchyard up --processes: its terminal goes away (SIGHUP to the process group)', () => {
  let up: Running;
  after(() => killGroup(up.child));

  it('stops every component gracefully, as on Ctrl-C', async () => {
    const started = await startUp();
    up = started.up;
    process.kill(-up.child.pid!, 'SIGHUP');
    await assertGracefulStop(up, started.components);
  });
});

describe('switchyard up --processes: its terminal goes away with its output (SIGHUP, then writes fail)', () => {
  let up: Running;
  after(() => killGroup(up.child));

  // A closed terminal fails every later write (EIO); a closed pipe does the same (EPIPE). `up`
  // exited at its first progress line, leaving each component to stop on its own, out of order.
  it('still stops every component in order and exits 0', async () => {
    const started = await startUp();
    up = started.up;
    up.child.stdout!.destroy();
    up.child.stderr!.destroy();
    process.kill(-up.child.pid!, 'SIGHUP');
    const { code, signal } = await up.exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null });
    await assertAllGone(started.components, 'after up exited');
  });
});

describe('switchyard up --processes: up killed with SIGKILL', () => {
  let up: Running;
  after(() => killGroup(up.child));

  it('leaves no component running', async () => {
    const started = await startUp();
    up = started.up;
    process.kill(up.child.pid!, 'SIGKILL');
    await up.exited;
    await assertAllGone(started.components, 'after up was killed');
  });
});
