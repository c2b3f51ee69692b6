import { afterEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTlsPair, watchTlsPair, type TlsPair } from '../src/tls-files.ts';
import { certificateFor127 } from '../src/testing.ts';

const first = certificateFor127();
const second = certificateFor127();
const missing = 'missing' in first || 'missing' in second ? 'openssl is missing' : false;

describe('TLS key and certificate files', { skip: missing }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-tls-files-'));
  const paths = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  const write = (pair: TlsPair, stampS: number): void => {
    writeFileSync(paths.certFile, pair.cert);
    writeFileSync(paths.keyFile, pair.key);
    for (const file of [paths.certFile, paths.keyFile]) utimesSync(file, stampS, stampS);
  };
  let stop: (() => void) | undefined;
  afterEach(() => stop?.());
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

  it('reads a matching pair, and names the file that cannot be read or the pair that does not match', () => {
    const a = first as TlsPair;
    const b = second as TlsPair;
    write(a, 1000);
    assert.deepEqual(readTlsPair(paths), { cert: a.cert, key: a.key });
    assert.throws(
      () => readTlsPair({ ...paths, keyFile: join(dir, 'absent.key') }),
      /^Error: tls\.keyFile: cannot read .*absent\.key/,
    );
    writeFileSync(paths.keyFile, b.key);
    assert.throws(() => readTlsPair(paths), /^Error: tls: .*tls\.crt and .*tls\.key make no TLS context/);
  });

  it('calls back with the new pair once the files change, and reports a pair it cannot use instead', async () => {
    const a = first as TlsPair;
    const b = second as TlsPair;
    write(a, 2000);
    const seen: TlsPair[] = [];
    const errors: string[] = [];
    stop = watchTlsPair(paths, (pair) => seen.push(pair), { intervalMs: 20, onError: (e) => errors.push(e.message) });
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(seen, [], 'nothing changed');
    // Half a rotation: the new key beside the old certificate.
    writeFileSync(paths.keyFile, b.key);
    utimesSync(paths.keyFile, 3000, 3000);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(seen, []);
    assert.equal(errors.length, 1);
    assert.match(errors[0]!, /make no TLS context/);
    write(b, 4000);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.deepEqual(seen, [{ cert: b.cert, key: b.key }]);
    assert.equal(errors.length, 1);
  });
});
