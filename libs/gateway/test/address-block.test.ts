import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { addressBlock } from '../src/address-block.ts';

describe('addressBlock', () => {
  it('keeps an IPv4 address, and what is no address, as it is', () => {
    assert.equal(addressBlock('198.51.100.4', 64), '198.51.100.4');
    assert.equal(addressBlock('unknown', 64), 'unknown');
  });

  it('reads an IPv6 address as the block of its first 64 bits, however it is written', () => {
    const block = '2001:db8:0:7:0:0:0:0/64';
    for (const address of [
      '2001:db8:0:7::1',
      '2001:db8::7:abcd:ef01:2345:6789',
      '2001:0db8:0000:0007:ffff:ffff:ffff:ffff',
    ])
      assert.equal(addressBlock(address, 64), block, address);
    assert.notEqual(addressBlock('2001:db8:0:8::1', 64), block);
  });

  it('masks a prefix that ends inside a group', () => {
    assert.equal(addressBlock('2001:db8:abcd:ef12::1', 56), '2001:db8:abcd:ef00:0:0:0:0/56');
    assert.equal(addressBlock('2001:db8:abcd:ef12::1', 1), '0:0:0:0:0:0:0:0/1');
    assert.equal(addressBlock('fd00::1', 1), '8000:0:0:0:0:0:0:0/1');
  });

  it('reads an IPv4 tail and drops a zone', () => {
    assert.equal(addressBlock('64:ff9b::192.0.2.33', 120), '64:ff9b:0:0:0:0:c000:200/120');
    assert.equal(addressBlock('fe80::1%eth0', 64), 'fe80:0:0:0:0:0:0:0/64');
    assert.equal(addressBlock('::1', 64), '0:0:0:0:0:0:0:0/64');
  });

  it('keeps each IPv6 address apart at 128', () => {
    assert.equal(addressBlock('2001:db8::1', 128), '2001:db8::1');
  });
});
