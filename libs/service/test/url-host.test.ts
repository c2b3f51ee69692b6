import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { urlHost } from '@switchyard/service';

describe('urlHost', () => {
  for (const [host, expected] of [
    ['::1', '[::1]'],
    ['::', '[::]'],
    ['fd00::7', '[fd00::7]'],
    ['::ffff:127.0.0.1', '[::ffff:127.0.0.1]'],
    ['127.0.0.1', '127.0.0.1'],
    ['0.0.0.0', '0.0.0.0'],
    ['scheduler.example', 'scheduler.example'],
  ] as const) {
    it(`writes ${host} as ${expected} in a URL, which then parses to that host`, () => {
      assert.equal(urlHost(host), expected);
      assert.equal(new URL(`http://${urlHost(host)}:7070/`).port, '7070');
    });
  }
});
