// A network namespace that can only dial out: joined to the host by a veth
// pair in a private /30 chosen here (checked against the host's routes first),
// with an nftables table inside the namespace that drops every NEW inbound
// connection; replies to connections the namespace opened still pass. Only
// what this file creates is touched (its namespace, its pair, its table), and
// no route leaves the pair. Needs root, iproute2 and nftables.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const NFT_TABLE = 'switchyard_dialout';

function which(binary: string): string | undefined {
  return ['/usr/sbin', '/usr/bin', '/sbin', '/bin'].map((d) => `${d}/${binary}`).find((p) => existsSync(p));
}

/** An `ip` or `nft` call takes milliseconds; one that takes this long is stuck. */
const COMMAND_TIMEOUT_MS = 30_000;

/** Bounded: a synchronous call that hung would stall this test file past every timeout. */
function run(command: string, args: readonly string[]): string {
  return execFileSync(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
    timeout: COMMAND_TIMEOUT_MS,
  });
}

/**
 * Why a dial-out namespace cannot be built here, or undefined when it can.
 * Probes by building a throwaway namespace with a conntrack rule, since a
 * container may have the binaries but not the capabilities or kernel modules.
 */
export function dialOutUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root to create a network namespace';
  const ip = which('ip');
  const nft = which('nft');
  if (!ip) return 'the `ip` command (iproute2) is not installed';
  if (!nft) return 'the `nft` command (nftables) is not installed';
  const probe = `sydoprobe${process.pid % 100_000}`;
  try {
    run(ip, ['netns', 'add', probe]);
  } catch (error) {
    return `cannot create a network namespace: ${firstLine(error)}`;
  }
  try {
    run(ip, ['netns', 'exec', probe, nft, 'add', 'table', 'inet', NFT_TABLE]);
    run(ip, ['netns', 'exec', probe, nft, ...chainArgs()]);
    run(ip, ['netns', 'exec', probe, nft, ...dropRuleArgs()]);
    return undefined;
  } catch (error) {
    return `nftables conntrack rules do not work in a namespace here: ${firstLine(error)}`;
  } finally {
    run(ip, ['netns', 'del', probe]);
  }
}

function firstLine(error: unknown): string {
  const stderr = (error as { stderr?: string }).stderr;
  return (stderr || String(error)).split('\n', 1)[0]!;
}

function chainArgs(): string[] {
  return ['add', 'chain', 'inet', NFT_TABLE, 'input', '{ type filter hook input priority 0 ; policy accept ; }'];
}

/** NEW connections arriving from outside the namespace are dropped (counted); loopback is left alone. */
function dropRuleArgs(): string[] {
  return ['add', 'rule', 'inet', NFT_TABLE, 'input', 'iifname', '!=', 'lo', 'ct', 'state', 'new', 'counter', 'drop'];
}

export interface DialOutNamespace {
  readonly name: string;
  /** The host's end of the pair: bind what the namespace must reach here. */
  readonly hostAddress: string;
  readonly nsAddress: string;
  /** Prefix that runs a command inside the namespace (`ip netns exec <ns>`); it execs, so the pid stays. */
  readonly wrapper: readonly string[];
  /** Installs the drop rule. */
  dropInbound(): void;
  /** Packets the drop rule has discarded so far. */
  droppedPackets(): number;
  /** Deletes the namespace (and with it its end of the pair and its table), then the host end. Idempotent. */
  close(): void;
}

/** A free /30 in 10.211.0.0/16, picked from the pid and skipped while any host route covers it. */
function chooseSubnet(ip: string): { host: string; ns: string } {
  for (let i = 0; i < 64; i++) {
    const slot = (process.pid + i * 97) % 16_384;
    const third = Math.floor(slot / 64);
    const fourth = (slot % 64) * 4;
    const host = `10.211.${third}.${fourth + 1}`;
    const ns = `10.211.${third}.${fourth + 2}`;
    const covering = run(ip, ['-4', 'route', 'show', 'to', 'match', host])
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.startsWith('default'));
    if (covering.length === 0) return { host, ns };
  }
  throw new Error('no free /30 in 10.211.0.0/16');
}

export function createDialOutNamespace(): DialOutNamespace {
  const ip = which('ip')!;
  const nft = which('nft')!;
  const tag = String(process.pid % 100_000);
  const name = `sydialout${tag}`;
  const hostIf = `sydh${tag}`;
  const nsIf = `sydn${tag}`;
  const inNs = (command: string, args: readonly string[]): string => run(ip, ['netns', 'exec', name, command, ...args]);
  const { host, ns } = chooseSubnet(ip);

  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    for (const args of [
      ['netns', 'del', name],
      // Normally gone with the namespace's end of the pair; removed here in case the pair was half made.
      ['link', 'del', hostIf],
    ]) {
      try {
        run(ip, args);
      } catch {
        // already gone
      }
    }
  };

  run(ip, ['netns', 'add', name]);
  try {
    run(ip, ['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf, 'netns', name]);
    run(ip, ['addr', 'add', `${host}/30`, 'dev', hostIf]);
    run(ip, ['link', 'set', hostIf, 'up']);
    inNs(ip, ['addr', 'add', `${ns}/30`, 'dev', nsIf]);
    inNs(ip, ['link', 'set', nsIf, 'up']);
    inNs(ip, ['link', 'set', 'lo', 'up']);
  } catch (error) {
    close();
    throw error;
  }

  return {
    name,
    hostAddress: host,
    nsAddress: ns,
    wrapper: [ip, 'netns', 'exec', name],
    dropInbound() {
      inNs(nft, ['add', 'table', 'inet', NFT_TABLE]);
      inNs(nft, chainArgs());
      inNs(nft, dropRuleArgs());
    },
    droppedPackets() {
      const listing = inNs(nft, ['list', 'chain', 'inet', NFT_TABLE, 'input']);
      const match = /counter packets (\d+)/.exec(listing);
      return match ? Number(match[1]) : 0;
    },
    close,
  };
}
