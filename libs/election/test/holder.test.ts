import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formatHolder, parseHolder } from '@switchyard/election';

const roundTrips = [
  {
    name: 'joins a replica id and a host:port',
    holder: { id: 'scheduler-0', address: '10.0.0.7:8080' },
    text: 'scheduler-0@10.0.0.7:8080',
  },
  { name: 'keeps an @ inside the address', holder: { id: 'r1', address: 'http://u@h:1' }, text: 'r1@http://u@h:1' },
];

const unparsable: Array<{ name: string; text: string | undefined }> = [
  { name: 'a free lease has no holder', text: undefined },
  { name: 'a value without @ is not a holder', text: 'scheduler-0' },
  { name: 'an empty id is not a holder', text: '@10.0.0.1:80' },
  { name: 'an empty address is not a holder', text: 'scheduler-0@' },
];

describe('holder identity', () => {
  for (const c of roundTrips) {
    it(c.name, () => {
      assert.equal(formatHolder(c.holder), c.text);
      assert.deepEqual(parseHolder(c.text), c.holder);
    });
  }
  for (const c of unparsable) it(`parses nothing: ${c.name}`, () => assert.equal(parseHolder(c.text), undefined));
  for (const bad of [
    { id: 'a@b', address: 'x' },
    { id: '', address: 'x' },
    { id: 'a', address: '' },
  ]) {
    it(`refuses to format ${JSON.stringify(bad)}`, () => assert.throws(() => formatHolder(bad), /holder/));
  }
});
