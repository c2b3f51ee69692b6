// What `helm install` prints after installing the gateway and scheduler
// charts (templates/NOTES.txt): the URLs to reach them, in the scheme they
// serve, and a warning where the values open the sandboxes to anyone.
// Rendered with the real helm binary by chartRenderer's notes, which says how
// it gets NOTES.txt without a cluster.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { chartRenderer, root } from './helm.ts';

const { skip, notes: notesOf } = chartRenderer('chart notes tests');

const INGRESS = ['ingress.enabled=true', 'ingress.hosts[0]=mcp.example.com'];
const INGRESS_TLS = [...INGRESS, 'ingress.tls[0].secretName=mcp-tls', 'ingress.tls[0].hosts[0]=mcp.example.com'];
const AUTH_NONE_WARNING = /^WARNING: auth\.mode is none/m;

describe('charts/gateway: NOTES.txt', { skip }, () => {
  const notes = (set?: readonly string[]): Promise<string> => notesOf('gateway', set);

  it('prints the in-cluster URL as https when the gateway serves TLS itself, else http', async () => {
    assert.match(await notes(), /^ {2}http:\/\/sy-gateway\.switchyard\.svc:80\/mcp$/m);
    const tls = await notes(['tls.existingSecret=gateway-tls']);
    assert.match(tls, /^ {2}https:\/\/sy-gateway\.switchyard\.svc:80\/mcp$/m);
    // The metrics port serves plain HTTP whatever tls says; the /mcp URL must not be printed so.
    assert.doesNotMatch(tls, /http:\/\/sy-gateway\.switchyard\.svc:80\//);
  });

  it('prints an Ingress host as https where the Ingress ends TLS for it', async () => {
    assert.match(await notes(INGRESS), /^ {2}http:\/\/mcp\.example\.com\/mcp$/m);
    assert.match(await notes(INGRESS_TLS), /^ {2}https:\/\/mcp\.example\.com\/mcp$/m);
  });

  for (const c of [
    { name: 'through an Ingress', set: INGRESS_TLS },
    { name: 'through a LoadBalancer Service', set: ['service.type=LoadBalancer'] },
  ]) {
    it(`warns that anyone may reach the sandboxes with auth.mode none, ${c.name}`, async () => {
      const text = await notes(c.set);
      assert.match(text, AUTH_NONE_WARNING);
      assert.match(text, /anyone who reaches it/);
      assert.match(text, /auth\.mode bearer or jwt/);
    });
  }

  it('does not warn inside the cluster, nor with authentication on', async () => {
    assert.doesNotMatch(await notes(), AUTH_NONE_WARNING);
    const bearer = ['auth.mode=bearer', 'auth.existingSecret=mcp-tokens'];
    assert.doesNotMatch(await notes([...INGRESS_TLS, ...bearer]), AUTH_NONE_WARNING);
  });
});

const METRICS_WARNING = /^WARNING: service\.type \w+ publishes the gateway's port, and with it\n\/metrics/m;

describe('charts/gateway: NOTES.txt on /metrics', { skip }, () => {
  const notes = (set?: readonly string[]): Promise<string> => notesOf('gateway', set);

  it('warns that a LoadBalancer or NodePort Service publishes /metrics when metricsPort is null, naming it', async () => {
    for (const type of ['LoadBalancer', 'NodePort']) {
      const text = await notes([`service.type=${type}`, 'metricsPort=null']);
      assert.match(text, METRICS_WARNING, type);
      assert.match(text, /Set metricsPort/, type);
      assert.doesNotMatch(text, /-metrics\./, type);
    }
  });

  it('names the metrics Service by default and does not warn, whatever the service.type', async () => {
    for (const set of [[], INGRESS_TLS, ['service.type=LoadBalancer'], ['service.type=NodePort']]) {
      const text = await notes(set);
      assert.doesNotMatch(text, METRICS_WARNING, set.join(' '));
      assert.match(text, /^ {2}http:\/\/sy-gateway-metrics\.switchyard\.svc:8081\/metrics$/m, set.join(' '));
    }
    assert.match(
      await notes(['metricsPort=9090']),
      /^ {2}http:\/\/sy-gateway-metrics\.switchyard\.svc:9090\/metrics$/m,
    );
  });

  it('does not warn with a ClusterIP Service and metricsPort null', async () => {
    assert.doesNotMatch(await notes(['metricsPort=null']), METRICS_WARNING);
    assert.doesNotMatch(await notes([...INGRESS_TLS, 'metricsPort=null']), METRICS_WARNING);
  });
});

describe('charts/scheduler: NOTES.txt', { skip }, () => {
  const notes = (set?: readonly string[]): Promise<string> => notesOf('scheduler', set);

  it('prints the in-cluster URL as https when the replicas serve TLS themselves, else http', async () => {
    assert.match(await notes(), /^ {2}http:\/\/sy-scheduler\.switchyard\.svc:\d+$/m);
    assert.match(
      await notes(['tls.existingSecret=scheduler-tls']),
      /^ {2}https:\/\/sy-scheduler\.switchyard\.svc:\d+$/m,
    );
  });

  it('says that join tokens admit peers to the epoch sync while no peerTokens are given', async () => {
    const unset =
      /^NOTE: no peerTokens are configured: the replicas admit peers to their epoch sync with the\n.*join tokens/m;
    assert.match(await notes(), unset);
    assert.doesNotMatch(await notes(['peerTokens.existingSecret=switchyard-peer']), unset);
    assert.doesNotMatch(await notes(['peerTokens.values={peer-token-0123456789abcdef}']), unset);
  });

  it('says replicas without join or peer tokens cannot sync, and with peer tokens only that runtimes cannot join', async () => {
    const noJoin: string[] = [];
    assert.match(await notes(noJoin), /no runtime can join, and the\nreplicas cannot sync epochs/);
    const peers = [...noJoin, 'peerTokens.values={peer-token-0123456789abcdef}'];
    assert.match(await notes(peers), /no join tokens are configured: no runtime can join\. Set/);
  });

  it('reads the leader from the Lease and the epoch from switchyard status, as the Lease holds no epoch', async () => {
    const text = await notes();
    assert.match(text, /^Leader: +kubectl -n switchyard get lease sy-scheduler +\(its HOLDER\)$/m);
    assert.match(
      text,
      /^Term, epoch and runtimes:\n +kubectl .* status --scheduler http:\/\/sy-scheduler\.switchyard\.svc:\d+$/m,
    );
  });

  // The image has no `switchyard` on its PATH (its entry point is node, the CLI apps/cli/src/main.ts): the
  // command printed must be one that runs in a scheduler pod as it stands, and ask with a token when one is needed.
  it('prints a switchyard status command that runs in a scheduler pod', async () => {
    for (const set of [[], ['apiTokens.values={api-token-0123456789abcdef}']]) {
      const line = /^ +(kubectl .* status --scheduler .*)$/m.exec(await notes(set))?.[1];
      const [, namespace, pod, program, script, ...args] =
        /^kubectl -n (\S+) exec (\S+) -- (\S+) (\S+) (.*)$/.exec(line ?? '') ?? [];
      assert.equal(namespace, 'switchyard', line);
      assert.equal(pod, 'sy-scheduler-0', 'the first pod of the StatefulSet');
      assert.equal(program, 'node', "the image's entry point");
      assert.ok(existsSync(join(root, script!)), `${script} is in the image (it holds apps/)`);
      assert.equal(args.join(' ').includes('--token <an API token>'), set.length > 0, line);
    }
  });
});
