// `switchyard up --processes` as a terminal signals it: Ctrl-C reaches the
// whole foreground process group, a closed terminal sends SIGHUP, and `up`
// itself may be killed outright. Each component must get one graceful
// shutdown (its `stopped` line, exit 0, never "second signal") and none may
// outlive `up`. Each `up` here is spawned detached, so it leads its own
// process group as a shell's foreground job does.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { descendants, killGroup, spawnCli, until, type Descendant, type Running } from './support.ts';

const COMPONENTS = ['scheduler-0', 'scheduler-1', 'scheduler-2', 'runtime-0', 'runtime-1', 'gateway'];

async function startUp(): Promise<{ up: Running; components: Descendant[] }> {
  const up = spawnCli(['up', '--processes', '--gateway-port', '0', '--scheduler-port', '0', '--log-level', 'info']);
  await until(
    'the /mcp URL on stdout',
    () => {
      if (up.child.exitCode !== null) throw new Error(`up exited early:\n${up.stderr()}`);
      return /^ {2}http:\/\/127\.0\.0\.1:\d+\/mcp$/m.test(up.stdout()) || undefined;
    },
    30_000,
  );
  const components = descendants(up.child.pid!).filter((d) => d.depth === 1);
  assert.equal(components.length, COMPONENTS.length, components.map((c) => c.command).join('\n'));
  return { up, components };
}

describe('switchyard up --processes: Ctrl-C in a terminal (SIGINT to the whole process group)', () => {
  let up: Running;
  after(() => killGroup(up.child));

  it("echoes the components' info lines with --log-level info", async () => {
    ({ up } = await startUp());
    for (const name of COMPONENTS) assert.match(up.stderr(), new RegExp(`^ {2}\\[${name}\\] ready$`, 'm'), name);
  });
});
