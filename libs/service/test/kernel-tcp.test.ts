// Reading /proc/net/tcp{,6} for the connections the kernel is retransmitting
// to: addresses in the kernel's word order matched to what Node says of a
// socket, and every other connection skipped.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { connectionKey, parseRetransmitting, type UnackedState } from '../src/kernel-tcp.ts';

const HEADER = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode';
const line = (local: string, remote: string, txRx: string, timer: string, retransmits: string): string =>
  `   0: ${local} ${remote} 01 ${txRx} ${timer} ${retransmits}     0        0 16591892 2 0000000000000000 20 4 30 10 -1`;

describe('parseRetransmitting', () => {
  const cases: Array<[string, string, [string, number, string, number] | undefined, UnackedState | undefined]> = [
    [
      'an IPv4 connection retransmitting 14 bytes a 6th time',
      line('0100007F:1F90', '01D5FEA9:C350', '0000000E:00000000', '01:00000C8A', '00000006'),
      ['127.0.0.1', 8080, '169.254.213.1', 50000],
      { unackedBytes: 14, retransmits: 6 },
    ],
    [
      'an IPv4 client of a dual-stack listener, as Node names it (::ffff:)',
      line('0100007F:1F90', '01D5FEA9:C350', '0000000E:00000000', '01:00000C8A', '00000002'),
      ['::ffff:127.0.0.1', 8080, '::ffff:169.254.213.1', 50000],
      { unackedBytes: 14, retransmits: 2 },
    ],
    [
      'an IPv6 connection (::1), its words in host order',
      line(
        '00000000000000000000000001000000:1F90',
        '00000000000000000000000001000000:C350',
        '00000010:00000000',
        '01:00000010',
        '00000003',
      ),
      ['::1', 8080, '::1', 50000],
      { unackedBytes: 16, retransmits: 3 },
    ],
    [
      'an IPv4-mapped address in tcp6',
      line(
        '0000000000000000FFFF00000100007F:1F90',
        '0000000000000000FFFF000001D5FEA9:C350',
        '0000000E:00000000',
        '01:00000010',
        '00000001',
      ),
      ['127.0.0.1', 8080, '169.254.213.1', 50000],
      { unackedBytes: 14, retransmits: 1 },
    ],
    [
      'a link-local IPv6 peer, which Node names with its zone (%eth0)',
      line(
        '000080FE00000000FF00FC00020000FE:1F90',
        '000080FE00000000FF00FC00010000FE:C350',
        '0000000E:00000000',
        '01:00000010',
        '00000001',
      ),
      ['fe80::fc:ff:fe00:2%eth0', 8080, 'fe80::fc:ff:fe00:1%eth0', 50000],
      { unackedBytes: 14, retransmits: 1 },
    ],
    [
      'a connection with no timer running (nothing unacknowledged)',
      line('0100007F:1F90', '01D5FEA9:C350', '00000000:00000000', '00:00000000', '00000000'),
      ['127.0.0.1', 8080, '169.254.213.1', 50000],
      undefined,
    ],
    [
      'a connection whose keepalive timer runs',
      line('0100007F:1F90', '01D5FEA9:C350', '00000000:00000000', '02:00000C8A', '00000000'),
      ['127.0.0.1', 8080, '169.254.213.1', 50000],
      undefined,
    ],
    [
      'a connection sent to just now, not retransmitted yet',
      line('0100007F:1F90', '01D5FEA9:C350', '0000000E:00000000', '01:00000014', '00000000'),
      ['127.0.0.1', 8080, '169.254.213.1', 50000],
      undefined,
    ],
  ];
  for (const [name, text, socket, expected] of cases) {
    it(`reads ${name}`, () => {
      const found = new Map<string, UnackedState>();
      parseRetransmitting(`${HEADER}\n${text}\n`, found);
      assert.deepEqual(found.get(connectionKey(...socket!)), expected);
      assert.equal(found.size, expected ? 1 : 0);
    });
  }
});
