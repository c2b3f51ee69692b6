// What binds a sandbox to a principal, as docs/operations.md says: a
// session is bound to the principal that opened it, a process (sandbox) is
// not. With the default identity strategies any principal that names a
// process reaches its sandbox; with `identity.process: principal` each
// principal has its own and cannot name another's. Real SDK clients in both
// eras, two bearer tokens, the `counter` tool counting per sandbox.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connectV2, startHarness, textOf, type Harness } from './harness.ts';

const ALICE = 'alice-token-0123456789';
const BOB = 'bob-token-9876543210';

/** The counter of the sandbox a client of `token` naming `process` reaches, in the era `mode`. */
async function count(h: Harness, token: string, process: string, mode: 'legacy' | 'modern'): Promise<string> {
  const client = await connectV2(h.url, mode, { authorization: `Bearer ${token}`, 'X-Switchyard-Process': process });
  try {
    return textOf(await client.callTool({ name: 'counter', arguments: {} }));
  } finally {
    await client.close();
  }
}

describe('a process named by a principal', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness(1, { auth: { mode: 'bearer', tokens: [ALICE, BOB] } });
  });
  after(() => h.close());

  it('is reached by any other principal that names it, in a session of its own or statelessly', async () => {
    assert.equal(await count(h, ALICE, 'alice-notes', 'legacy'), '1');
    assert.equal(await count(h, BOB, 'alice-notes', 'legacy'), '2', "bob's session is in alice's sandbox");
    assert.equal(await count(h, BOB, 'alice-notes', 'modern'), '3', 'and so is his stateless request');
  });
});

describe('a gateway whose process identity is the principal', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness(1, { auth: { mode: 'bearer', tokens: [ALICE, BOB] }, identity: { process: ['principal'] } });
  });
  after(() => h.close());

  it('gives each principal its own sandbox, whatever process a request names', async () => {
    assert.equal(await count(h, ALICE, 'shared', 'legacy'), '1');
    assert.equal(await count(h, ALICE, 'other', 'modern'), '2', "alice's one sandbox, whatever she names");
    assert.equal(await count(h, BOB, 'shared', 'legacy'), '1', 'bob has his own');
    assert.equal(await count(h, BOB, 'shared', 'modern'), '2');
  });
});
