// A runtime id that another scheduler replica holds a live tunnel for (as this replica's view of the cluster
// shows, with the instance id of the runtime process on it) is not taken by a connect here naming another
// instance: two processes started with one id that dial two replicas do not take the id from each other. The
// runtime itself (its instance) redialling here is admitted, and so is a runtime that names none (an earlier
// release). A real endpoint on loopback; the view is a map the test fills.
import { after, afterEach, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type http2 from 'node:http2';
import type { TunnelDialer } from '../src/index.ts';
import { TOKEN, encodeInfo, rawConnect, runtimeInfo, startRuntime, startScheduler } from './helpers.ts';
import type { Scheduler } from './helpers.ts';

const THERE = 'instance-there-0123456789';
const NEWCOMER = 'instance-newcomer-012345';

const hello = (_req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): void => void res.end('hello');

describe('a runtime id held by a live runtime at another replica', () => {
  let scheduler: Scheduler;
  /** runtime id → instance, as a view of the cluster would show live tunnels at other replicas. */
  const elsewhere = new Map<string, string | undefined>();
  const dialers: TunnelDialer[] = [];
  before(async () => {
    scheduler = await startScheduler({ instanceElsewhere: (id) => elsewhere.get(id) });
  });
  afterEach(async () => {
    await Promise.all(dialers.splice(0).map((d) => d.close()));
    elsewhere.clear();
  });
  after(() => scheduler.close());

  const connect = (id: string, instance?: string) =>
    rawConnect(scheduler, {
      authorization: `Bearer ${TOKEN}`,
      'x-runtime-info': encodeInfo(runtimeInfo(id)),
      ...(instance === undefined ? {} : { 'x-runtime-instance': instance }),
    });

  it('is refused 409 to another instance, with the body and warning of one held here', async () => {
    elsewhere.set('rt-away', THERE);
    const claim = await connect('rt-away', NEWCOMER);
    assert.equal(claim.status, 409);
    assert.deepEqual(JSON.parse(claim.body), { error: 'runtime id held by another live runtime', runtime: 'rt-away' });
    const said = scheduler.logs.find((l) => l.msg === 'runtime connect refused: id held by another live runtime');
    assert.equal(said?.level, 'warn');
    assert.deepEqual(said.obj, {
      remote: '127.0.0.1',
      runtime: 'rt-away',
      status: 409,
      error: 'runtime id held by another live runtime',
      elsewhere: true,
    });
    assert.equal(scheduler.endpoint.get('rt-away'), undefined);
  });

  it('is admitted to the instance on it (the runtime redialling another replica)', async () => {
    elsewhere.set('rt-moved', THERE);
    const { dialer, tunnel } = await startRuntime(scheduler, 'rt-moved', hello, { instance: THERE });
    dialers.push(dialer);
    assert.equal(tunnel.instance, THERE, 'the tunnel carries its instance to publish');
  });

  it('is admitted to a runtime that names no instance (an earlier release), as before', async () => {
    elsewhere.set('rt-older', THERE);
    assert.equal((await connect('rt-older')).status, 101);
  });

  it('is admitted to any instance when the view shows none (no live claim, or one reported without it)', async () => {
    elsewhere.set('rt-unnamed', undefined);
    assert.equal((await connect('rt-unnamed', NEWCOMER)).status, 101);
    assert.equal((await connect('rt-free', NEWCOMER)).status, 101);
  });
});
