// How the bench's helper servers (idle-server.ts, passthrough.ts) run as
// child processes: on a free loopback port, printed as their first stdout
// line, until the bench closes their stdin.
import { once } from 'node:events';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';

export async function serveUntilStdinEnds(server: http.Server): Promise<void> {
  // As the gateway app: streams may stay open for hours.
  server.requestTimeout = 0;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
  process.stdin.once('end', () => process.exit(0));
  process.stdin.resume();
}
