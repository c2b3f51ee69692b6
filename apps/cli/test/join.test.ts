// `switchyard runtime join` against a scheduler replica in this process (the
// command as a child): a refusal ends it with exit code 1 and a line that
// says what the scheduler refused, and why.
import { createServer, type IncomingMessage } from 'node:http';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SchedulerReplica } from '@switchyard/scheduler';
import { listening, runCli, startOneReplica, type Listening } from './support.ts';

const JOIN_TOKEN = 'join-token-0123456789abcdef';

/**
 * A web server at the URL given to `runtime join`, not a scheduler: it answers every request `status` with
 * `body` (or what `body` makes of the request), then closes the connection.
 */
async function startAnswering(
  status: number,
  contentType: string,
  body: string | ((req: IncomingMessage) => string),
): Promise<Listening> {
  const server = createServer((req, res) => {
    req.resume();
    const text = typeof body === 'string' ? body : body(req);
    res.writeHead(status, { 'content-type': contentType, connection: 'close' }).end(text);
  });
  return listening(server);
}

/** startAnswering for the enclosing suite: started before its tests, closed after them; `url` is read in tests. */
function answering(...args: Parameters<typeof startAnswering>): { readonly url: string } {
  let server: Awaited<ReturnType<typeof startAnswering>> | undefined;
  before(async () => {
    server = await startAnswering(...args);
  });
  after(() => server?.close());
  return {
    get url() {
      return server!.url;
    },
  };
}

describe('switchyard runtime join, an --id that is no identity value', () => {
  let replica: SchedulerReplica;
  before(async () => {
    replica = await startOneReplica({ joinTokens: () => [JOIN_TOKEN] });
  });
  after(() => replica?.close());

  it('names --id and the rule, and exits 2 before dialling (the scheduler would name a header)', async () => {
    const { code, stderr } = await runCli(['runtime', 'join', replica.url, '--token', JOIN_TOKEN, '--id', 'two words']);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /^switchyard: --id must be 1-128 characters from \[A-Za-z0-9\._:@-\], got "two words"$/m);
    assert.doesNotMatch(stderr, /dialling|X-Runtime-Info/);
  });
});

describe('switchyard runtime join, refused by a scheduler for what it says of itself', () => {
  // A scheduler's 400 (docs/protocol.md §1), from a release whose rules this command does not check first.
  const server = answering(
    400,
    'application/json',
    '{"error":"invalid X-Runtime-Info","field":"X-Runtime-Info.version","detail":"version: not semver"}',
  );

  it('names the field the scheduler refused and the rule it broke, and exits 1', async () => {
    const { code, stderr } = await runCli(['runtime', 'join', server.url, '--token', JOIN_TOKEN, '--id', 'rt-0']);
    assert.equal(code, 1, stderr);
    assert.match(
      stderr,
      /^switchyard: http:\/\/127\.0\.0\.1:\d+ refused this runtime: invalid X-Runtime-Info \(version: not semver\)$/m,
    );
  });
});

describe('switchyard runtime join, refused for its id', () => {
  let replica: SchedulerReplica;
  before(async () => {
    // A join token scoped to ids gpu-*: a runtime joining as another id with it is refused 403 at every dial.
    replica = await startOneReplica({ joinTokens: () => [`${JOIN_TOKEN} gpu-*`] });
  });
  after(() => replica?.close());

  it('says the join token does not admit the id, and exits 1 at once rather than dialling on', async () => {
    const args = ['runtime', 'join', replica.url, '--token', JOIN_TOKEN, '--id', 'cpu-1', '--wait-seconds', '600'];
    const { code, stderr } = await runCli(args);
    assert.equal(code, 1, stderr);
    assert.match(
      stderr,
      /^switchyard: http:\/\/127\.0\.0\.1:\d+ refused runtime id cpu-1: the join token \(--token\) admits other ids; pass an --id it admits, or a token for this one$/m,
    );
  });
});

describe('switchyard runtime join, refused 403 by something that is no scheduler', () => {
  // A web application firewall or a proxy in front: its 403 names no runtime id.
  const server = answering(403, 'text/plain', 'Request blocked by policy');

  it('shows what refused it, not a word about the join token and ids, and exits 1', async () => {
    const { code, stderr } = await runCli(['runtime', 'join', server.url, '--token', JOIN_TOKEN, '--id', 'rt-0']);
    assert.equal(code, 1, stderr);
    assert.doesNotMatch(stderr, /admits other ids/);
    assert.match(
      stderr,
      /^switchyard: http:\/\/127\.0\.0\.1:\d+ refused this runtime \(HTTP 403\): Request blocked by policy$/m,
    );
  });
});

describe('switchyard runtime join, refused by something that is no scheduler', () => {
  // A proxy's error page, or any server at the URL given: its body is shown, but as one line of plain text.
  const PAGE = '<html>\nswitchyard: joined as rt-0\x1b[2K\r</html>';
  const server = answering(400, 'text/html', PAGE);

  it('prints the body with its control characters escaped, so it cannot forge a line', async () => {
    const { code, stderr } = await runCli(['runtime', 'join', server.url, '--token', JOIN_TOKEN, '--id', 'rt-0']);
    assert.equal(code, 1, stderr);
    assert.doesNotMatch(stderr, /^switchyard: joined/m, 'no line of the body starts a line of the output');
    assert.doesNotMatch(stderr.replaceAll('\n', ''), /\p{Cc}/u, 'no control character but the newlines ending lines');
    assert.match(stderr, /refused this runtime: <html>\\u000aswitchyard: joined as rt-0\\u001b\[2K\\u000d<\/html>$/m);
  });
});

describe('switchyard runtime join, refused by a server that echoes the request', () => {
  // A debugging proxy or echo service at the URL given answers 400 with what it received, the Authorization
  // header among it: the refusal's body is shown, the join token in it never is.
  const server = answering(
    400,
    'text/plain',
    (req) => `bad request; you sent Authorization: ${req.headers.authorization}`,
  );

  it('prints the body with the join token masked, and exits 1', async () => {
    const { code, stderr } = await runCli(['runtime', 'join', server.url, '--token', JOIN_TOKEN, '--id', 'rt-0']);
    assert.equal(code, 1, stderr);
    assert.ok(!stderr.includes(JOIN_TOKEN), `the join token is never printed:\n${stderr}`);
    assert.match(stderr, /refused this runtime: bad request; you sent Authorization: Bearer \(the join token\)$/m);
  });
});

describe('switchyard runtime join, at a URL that is no scheduler', () => {
  // A gateway's URL, a scheduler's /ui, any web server: nothing there will ever take the tunnel.
  for (const status of [404, 200]) {
    it(`says the URL does not answer as a scheduler, and exits 1, at an answer of ${status}`, async () => {
      const server = await startAnswering(status, 'text/html', '<!DOCTYPE html>');
      const url = `${server.url}/mcp`;
      try {
        const { code, stderr } = await runCli(['runtime', 'join', url, '--token', JOIN_TOKEN, '--id', 'rt-0']);
        assert.equal(code, 1, stderr);
        assert.match(
          stderr,
          new RegExp(
            `^switchyard: ${url} does not answer as a Switchyard scheduler \\(HTTP ${status} to /mcp/api/runtime/connect\\): ` +
              'pass a scheduler replica or its Service as <scheduler-url>$',
            'm',
          ),
        );
        assert.equal(stderr.match(/^switchyard: /gm)?.length, 2, `the dialling line and that line only:\n${stderr}`);
      } finally {
        server.close();
      }
    });
  }
});

describe('switchyard runtime join, answered 502, 503 or 504', () => {
  // A scheduler at its maxRuntimes, or a proxy in front whose scheduler is down: something answered, and may
  // take the tunnel soon. Said at the first answer (and every tenth, as failed dials are), not at every one.
  const CASES = [
    { status: 502, contentType: 'text/html', body: '<html><body>502 Bad Gateway</body></html>', says: '' },
    {
      status: 503,
      contentType: 'application/json',
      body: '{"error":"runtime capacity reached"}',
      says: ' \\(runtime capacity reached\\)',
    },
    { status: 504, contentType: 'text/html', body: '<html><body>504 Gateway Time-out</body></html>', says: '' },
  ];
  for (const { status, contentType, body, says } of CASES) {
    it(`says the URL answered HTTP ${status} and that it dials again, then gives up after --wait-seconds`, async () => {
      const server = await startAnswering(status, contentType, body);
      try {
        const args = ['runtime', 'join', server.url, '--token', JOIN_TOKEN, '--id', 'rt-0', '--wait-seconds', '2'];
        const { code, stderr } = await runCli(args);
        assert.equal(code, 1, stderr);
        const url = server.url.replaceAll('.', '\\.');
        const lines = stderr.trimEnd().split('\n');
        assert.equal(lines.length, 3, `the dialling line, one answer and the end, not one line per dial:\n${stderr}`);
        assert.match(
          lines[1]!,
          new RegExp(
            `^switchyard: ${url} answered HTTP ${status}${says}; dialling again for up to [12] s \\(--wait-seconds\\)$`,
          ),
        );
        assert.match(
          lines[2]!,
          new RegExp(
            `^switchyard: gave up dialling ${url} after 2 s: answered HTTP ${status}${says}; check <scheduler-url>`,
          ),
        );
      } finally {
        server.close();
      }
    });
  }
});
