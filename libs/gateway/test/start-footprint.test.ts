// What loading the gateway library costs a process that never uses it for
// more than its own work: modules it has no use for are resident memory in
// every gateway (see docs/benchmarks.md, "Where the memory of an idle
// stream goes"), and an import is all it takes to bring one in unseen.
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';

/** In a fresh process: whether importing `specifier` loaded Node's built-in module `builtin`. */
function loadsBuiltin(specifier: string, builtin: string): boolean {
  // moduleLoadList names every built-in module the process has loaded, internal ones included.
  const script = `
    await import(${JSON.stringify(specifier)});
    console.log(process.moduleLoadList.includes(${JSON.stringify(`NativeModule ${builtin}`)}));`;
  return JSON.parse(
    execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' }),
  ) as boolean;
}

describe('loading @switchyard/gateway', () => {
  // `import http from 'node:http'` builds the module's ESM namespace by
  // reading every export, and three (WebSocket, CloseEvent, MessageEvent) are
  // getters that load Node's fetch: about 2 MB of RSS from the start of every
  // gateway, which never uses it. process.getBuiltinModule does not.
  it("does not load Node's bundled fetch implementation", () => {
    assert.equal(loadsBuiltin('@switchyard/gateway', 'internal/deps/undici/undici'), false);
  });

  // The probe itself must be able to see it.
  it('would see it loaded by a namespace import of node:http', () => {
    assert.equal(loadsBuiltin('node:http', 'internal/deps/undici/undici'), true);
  });
});
