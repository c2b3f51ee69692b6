// The sessions and sandboxes of a local cluster's runtimes. A session nobody
// ends (no DELETE: a Ctrl-C'd client, a CLI run) keeps its sandbox until its
// idle timeout; with the runtime app's 30 min, about a hundred of them filled
// the local cluster (50 sandboxes per runtime, two runtimes) and every new
// client got 503 for up to half an hour. Both modes run their runtimes with
// one set of settings: the in-process runtimes take it as options, the runtime
// app (`up --processes`) as the config file read here by the app itself.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeRuntimeConfig } from '../src/process-cluster.ts';

const RUNTIME_MAIN = fileURLToPath(new URL('../../runtime/src/main.ts', import.meta.url));

describe('the runtimes of switchyard up', () => {
  let dir = '';
  before(() => (dir = mkdtempSync(join(tmpdir(), 'switchyard-local-runtime-'))));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('close a session left idle for 5 minutes, and hold 50 sandboxes each', () => {
    const config = writeRuntimeConfig(dir);
    const printed = execFileSync(
      process.execPath,
      [
        ...[RUNTIME_MAIN, '--config', config, '--runtime-id', 'r', '--scheduler-url', 'http://127.0.0.1:1'],
        ...['--join-token', 'a-join-token-of-the-run', '--print-config'],
      ],
      { encoding: 'utf8', timeout: 15_000 },
    );
    assert.match(printed, /^sessionIdleMs: 300000$/m);
    assert.match(printed, /^sandboxesMax: 50$/m);
  });
});
