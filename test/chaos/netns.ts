// A network namespace joined to the host by a veth pair with link-local
// addresses, to cut one runtime off the network the way a partition does:
// packets vanish, nothing is refused. Only what this file creates is touched:
// its own namespace, its own veth pair, its own nftables table inside the
// namespace; no route leaves the pair. Needs root and `ip`; cuts with
// nftables when `nft` is installed, otherwise by taking the namespace's end
// of the pair down (the host side then sees the same silence).
import { execFileSync, type ExecFileSyncOptions } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';

const HOST_ADDRESS = '169.254.213.1';
const NS_ADDRESS = '169.254.213.2';
const NFT_TABLE = 'switchyard_chaos';

function which(binary: string): string | undefined {
  return ['/usr/sbin', '/usr/bin', '/sbin', '/bin'].map((d) => `${d}/${binary}`).find((p) => existsSync(p));
}

/** Why the namespace scenario cannot run here, or undefined when it can. */
export function netnsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root to create a network namespace';
  if (!which('ip')) return 'the `ip` command (iproute2) is not installed';
  return undefined;
}

export interface Partition {
  /** Prefix that runs a command inside the namespace. */
  readonly wrapper: readonly string[];
  /** The host's end of the pair, which a process in the namespace dials to reach a host listener bound to it (or to all addresses). */
  readonly hostAddress: string;
  /** How the cut is made: `nftables` or `link-down`. */
  readonly method: 'nftables' | 'link-down';
  /** A URL reachable from inside the namespace that forwards to `target` (host:port on loopback). */
  forward(targetPort: number): Promise<string>;
  cut(): void;
  heal(): void;
  /**
   * Drops every packet of the connections open now, both ways, and lets new
   * ones pass: a NAT or firewall in between that forgot its connections
   * (nftables only; `heal` ends it).
   */
  forget?(): void;
  /** Removes the namespace (and with it the veth pair and the table), closes forwarders. Idempotent. */
  close(): Promise<void>;
}

/** An `ip` or `nft` call takes milliseconds; one that takes this long is stuck. */
const COMMAND_TIMEOUT_MS = 30_000;

export function createPartition(): Partition {
  const ip = which('ip')!;
  const nft = which('nft');
  const tag = String(process.pid % 100_000);
  const ns = `sychaos${tag}`;
  const hostIf = `syh${tag}`;
  const nsIf = `syn${tag}`;
  // Bounded: a synchronous call that hung would stall this test file past every timeout.
  const options: ExecFileSyncOptions = { stdio: ['ignore', 'ignore', 'pipe'], timeout: COMMAND_TIMEOUT_MS };
  const run = (args: string[]): void => void execFileSync(ip, args, options);
  const inNs = (command: string, args: string[]): void =>
    void execFileSync(ip, ['netns', 'exec', ns, command, ...args], options);

  run(['netns', 'add', ns]);
  try {
    run(['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf, 'netns', ns]);
    run(['addr', 'add', `${HOST_ADDRESS}/30`, 'dev', hostIf]);
    run(['link', 'set', hostIf, 'up']);
    inNs(ip, ['addr', 'add', `${NS_ADDRESS}/30`, 'dev', nsIf]);
    inNs(ip, ['link', 'set', nsIf, 'up']);
    inNs(ip, ['link', 'set', 'lo', 'up']);
  } catch (error) {
    try {
      run(['netns', 'del', ns]);
    } catch {
      // best effort: the namespace may be half made
    }
    throw error;
  }

  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  let closed = false;
  // Should the test process die before its after hooks, the namespace (and the veth pair with it) still goes.
  const removeOnExit = (): void => {
    try {
      run(['netns', 'del', ns]);
    } catch {
      // already gone
    }
  };
  process.once('exit', removeOnExit);
  const method = nft ? 'nftables' : 'link-down';
  return {
    wrapper: [ip, 'netns', 'exec', ns],
    hostAddress: HOST_ADDRESS,
    method,
    forward(targetPort) {
      const server = createServer((inbound) => {
        const outbound = createConnection({ host: '127.0.0.1', port: targetPort });
        for (const s of [inbound, outbound]) {
          sockets.add(s);
          s.once('close', () => sockets.delete(s));
          s.on('error', () => {
            inbound.destroy();
            outbound.destroy();
          });
        }
        inbound.pipe(outbound).pipe(inbound);
      });
      servers.push(server);
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, HOST_ADDRESS, () =>
          resolve(`http://${HOST_ADDRESS}:${(server.address() as { port: number }).port}`),
        );
      });
    },
    cut() {
      if (nft) {
        inNs(nft, ['add', 'table', 'inet', NFT_TABLE]);
        for (const hook of ['input', 'output']) {
          inNs(nft, [
            'add',
            'chain',
            'inet',
            NFT_TABLE,
            hook,
            `{ type filter hook ${hook} priority 0 ; policy drop ; }`,
          ]);
          // Loopback inside the namespace stays up: the runtime's own listeners are not the network.
          inNs(nft, ['add', 'rule', 'inet', NFT_TABLE, hook, hook === 'input' ? 'iif' : 'oif', 'lo', 'accept']);
        }
      } else {
        inNs(ip, ['link', 'set', nsIf, 'down']);
      }
    },
    heal() {
      if (nft) inNs(nft, ['delete', 'table', 'inet', NFT_TABLE]);
      else inNs(ip, ['link', 'set', nsIf, 'up']);
    },
    ...(nft
      ? {
          forget() {
            // A connection opened from here on is marked by its SYN (conntrack keeps the mark for both
            // ways); packets of unmarked connections, the ones open before, are dropped. Not by `ct state
            // new`: conntrack starts in the namespace with the table, and picks the open ones up as new.
            inNs(nft, ['add', 'table', 'inet', NFT_TABLE]);
            for (const hook of ['input', 'output']) {
              const chain = `{ type filter hook ${hook} priority 0 ; policy accept ; }`;
              inNs(nft, ['add', 'chain', 'inet', NFT_TABLE, hook, chain]);
              inNs(nft, ['add', 'rule', 'inet', NFT_TABLE, hook, hook === 'input' ? 'iif' : 'oif', 'lo', 'accept']);
            }
            const syn = ['tcp', 'flags', '&', '(syn|ack)', '==', 'syn'];
            inNs(nft, ['add', 'rule', 'inet', NFT_TABLE, 'output', ...syn, 'ct', 'mark', 'set', '1']);
            for (const hook of ['input', 'output']) {
              inNs(nft, ['add', 'rule', 'inet', NFT_TABLE, hook, 'ct', 'mark', '!=', '1', 'drop']);
            }
          },
        }
      : {}),
    async close() {
      if (closed) return;
      closed = true;
      process.off('exit', removeOnExit);
      for (const s of sockets) s.destroy();
      await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
      try {
        run(['netns', 'del', ns]);
      } catch {
        // already gone
      }
      try {
        run(['link', 'del', hostIf]);
      } catch {
        // deleted with the namespace's end of the pair
      }
    },
  };
}
