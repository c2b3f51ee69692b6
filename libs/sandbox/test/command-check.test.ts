// A stdio class whose command this node does not have fails every start,
// one client at a time (502, sandbox.start_failed); the runtime says so
// once when it starts, naming the class, before any client is refused.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import type { SandboxHost } from '@switchyard/sandbox';
import { captureLogger, testHost } from './fixtures/harness.ts';

// A server's own folder, the cwd of its class, holding an executable script the runtime's folder does not.
const serverDir = mkdtempSync(join(tmpdir(), 'command-check-'));
mkdirSync(join(serverDir, 'bin'));
writeFileSync(join(serverDir, 'bin/serve'), '#!/bin/sh\n');
chmodSync(join(serverDir, 'bin/serve'), 0o755);

describe('a stdio class whose command this node does not have', () => {
  const logger = captureLogger();
  const host: SandboxHost = testHost({
    runtimeId: 'rt-commands',
    classes: {
      absent: { engine: 'stdio', command: '/nonexistent/switchyard-test/mcp-server' },
      unlisted: { engine: 'stdio', command: 'switchyard-test-no-such-mcp-server' },
      // Found on the PATH its env gives it, where spawn looks.
      'own-path': { engine: 'stdio', command: 'sh', env: { PATH: '/nonexistent/bin' } },
      absolute: { engine: 'stdio', command: process.execPath },
      'relative-path': { engine: 'stdio', command: relative(process.cwd(), process.execPath) },
      'on-path': { engine: 'stdio', command: 'sh' },
      // spawn takes a relative command from the class's cwd, as the server's own folder.
      'in-own-dir': { engine: 'stdio', command: 'bin/serve', cwd: serverDir },
      'not-in-own-dir': { engine: 'stdio', command: relative(process.cwd(), process.execPath), cwd: serverDir },
    },
    logger,
  });
  after(() => host.close());
  after(() => rmSync(serverDir, { recursive: true, force: true }));
  const warned = () =>
    logger.lines.filter((l) => l.level === 'warn' && l.obj.event === 'sandbox.command_not_found').map((l) => l.obj);

  it('is warned of at start, once per class, naming the class and the command', () => {
    assert.deepEqual(
      warned().map((w) => [w.class, w.command]),
      [
        ['absent', '/nonexistent/switchyard-test/mcp-server'],
        ['unlisted', 'switchyard-test-no-such-mcp-server'],
        ['own-path', 'sh'],
        ['not-in-own-dir', relative(process.cwd(), process.execPath)],
      ],
    );
  });

  it('is not warned of when the command is there, by path or on PATH', () => {
    const named = warned().map((w) => w.class);
    for (const found of ['absolute', 'relative-path', 'on-path', 'in-own-dir'])
      assert.ok(!named.includes(found), found);
  });
});
