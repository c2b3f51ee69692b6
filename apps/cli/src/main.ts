#!/usr/bin/env node
// The `switchyard` command: a local cluster, cluster status, scheduling
// explanations, joining a runtime from any machine, and the checks the
// charts' `helm test` pods run.
//
// Each command's module is loaded only when that command runs: the cluster's
// code is a second of compiling, which help and bad usage should not wait for.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { EngineConfig } from '@switchyard/sandbox';
import type { SchedulerTarget } from './inspect.ts';
import { commandHelp, IDENTITY_RULE, OVERVIEW, usageOf } from './help.ts';
import { JOIN_CLASSES, isJoinClass, type JoinClass } from './join-classes.ts';

function port(value: string | undefined, fallback: number, flag: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${flag} must be a port number, got ${value}`);
  return n;
}

class UsageError extends Error {}

/**
 * Writes `text` and a newline, resolving once the stream has taken it all.
 * Output to a pipe is written asynchronously, and process.exit() drops what
 * is still queued: `switchyard status | grep …` lost every row past the pipe's
 * buffer (about 1,000 runtimes). A reader gone (`| head`) ends the wait too.
 */
function print(stream: NodeJS.WriteStream, text: string): Promise<void> {
  return new Promise((resolve) => {
    // Kept on: the stream emits its error a tick after the write's callback, and unheard it would crash.
    stream.on('error', () => resolve());
    stream.write(`${text}\n`, () => resolve());
  });
}

/** A scheduler's base URL as given, without trailing slashes; only http(s) URLs are taken. */
function schedulerUrl(value: string, what: string): string {
  const url = URL.canParse(value) ? new URL(value) : undefined;
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new UsageError(`${what} must be an http(s) URL such as http://127.0.0.1:7070, got ${value}`);
  }
  return value.replace(/\/+$/, '');
}

function positiveInteger(value: string | undefined, fallback: number, flag: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`${flag} must be a positive integer, got ${value}`);
  return n;
}

function seconds(value: string | undefined, fallback: number, flag: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 3600)
    throw new UsageError(`${flag} must be 0 to 3600 seconds, got ${value}`);
  return n;
}

/** The classes given to `runtime join` by --class, each one it can serve. */
function joinClasses(names: readonly string[]): JoinClass[] {
  const unknown = names.filter((name) => !isJoinClass(name));
  if (unknown.length > 0) {
    throw new UsageError(
      `unknown class ${unknown.join(', ')}: runtime join serves ${JOIN_CLASSES.join(', ')}, and those of a --config file`,
    );
  }
  return names.filter(isJoinClass);
}

/**
 * The classes of `runtime join --config <file>`, beside the `known` ones
 * --class gives. Only classes: what else a runtime config sets, join sets
 * from its own flags (or does not offer), and an operator who wrote it
 * expects it to happen, so such a file is refused rather than half taken.
 */
async function joinConfigClasses(file: string, known: readonly JoinClass[]): Promise<Record<string, EngineConfig>> {
  await mustRead(file, '--config');
  const { joinConfig } = await import('./join-config.ts');
  const { classes, otherKeys } = joinConfig(file, process.cwd());
  if (otherKeys.length > 0) {
    throw new UsageError(
      `--config ${file} sets ${otherKeys.join(', ')}: runtime join takes only classes from a config file (its ` +
        'command line gives the scheduler URLs, token, id and sandboxes; the rest it does not offer); remove them, ' +
        'or run the runtime app (apps/runtime/src/main.ts) with this file, which takes them all',
    );
  }
  const clash = known.find((name) => Object.hasOwn(classes, name));
  if (clash !== undefined) {
    throw new UsageError(
      `class ${clash} is given by --class and by --config ${file}: rename the file's, or drop --class`,
    );
  }
  return { ...classes };
}

/** The flags that give a token: at most one of them. */
interface TokenFlags {
  readonly token?: string | undefined;
  readonly 'token-file'?: string | undefined;
}

/** A token and where it came from, which is what messages name: never the token itself. */
interface GivenToken {
  readonly token: string;
  readonly source: string;
}

/**
 * The token of `--token-file`, `--token`, or else the environment variable
 * `envName`; none when none of them gives one (an empty variable gives none).
 * Without the white space and byte-order mark around it that a copy from a
 * file brings (schedulers and runtimes trim their token files the same way).
 * One with any other character outside printable ASCII (a line break inside,
 * a non-breaking space) is bad usage, named by where it came from and the
 * position only: the error would otherwise print the secret.
 */
async function givenToken(values: TokenFlags, envName: string): Promise<GivenToken | undefined> {
  if (values.token !== undefined && values['token-file'] !== undefined) {
    throw new UsageError('give --token or --token-file, not both');
  }
  const file = values['token-file'];
  const [value, source] =
    file !== undefined
      ? [await tokenFromFile(file), `--token-file ${file}`]
      : values.token !== undefined
        ? [values.token, '--token']
        : [process.env[envName], envName];
  const token = value?.trim();
  if (!token) return undefined;
  const bad = token.search(/[^\x20-\x7e]/);
  if (bad >= 0) {
    throw new UsageError(`${source} holds a character a token cannot have, at position ${bad + 1} (it is not shown)`);
  }
  return { token, source };
}

/** Why a file could not be read, in words, for the errors an operator's typo or a mount most often brings. */
const UNREADABLE = new Map([
  ['ENOENT', 'no such file'],
  ['EACCES', 'permission denied'],
  ['EISDIR', 'a directory, not a file'],
]);

/** Refuses, as bad usage, a file given to `flag` that cannot be read, saying why in words. */
async function mustRead(file: string, flag: string): Promise<void> {
  try {
    await readFile(file);
  } catch (error) {
    const code = String((error as { code?: unknown }).code);
    throw new UsageError(`${flag} ${file} cannot be read (${UNREADABLE.get(code) ?? (error as Error).message})`);
  }
}

/**
 * The first token of a file of one per line (blank lines and `#` comments
 * skipped), as schedulers read theirs. Read once first on its own: the
 * secret source takes a file it cannot read for one without tokens, and
 * the operator needs to know which it is.
 */
async function tokenFromFile(file: string): Promise<string> {
  await mustRead(file, '--token-file');
  // Loaded here, not at the top: the service lib is most of a second to compile, which help should not wait for.
  const { secretSource } = await import('@switchyard/service');
  const [first] = secretSource([], file)();
  if (first === undefined)
    throw new UsageError(`--token-file ${file} holds no token (only blank lines and # comments)`);
  return first;
}

/** The replica `status`, `explain` and `check scheduler` ask. */
async function schedulerTarget(values: TokenFlags & { scheduler?: string | undefined }): Promise<SchedulerTarget> {
  const given = await givenToken(values, 'SWITCHYARD_API_TOKEN');
  const url = schedulerUrl(values.scheduler ?? 'http://127.0.0.1:7070', '--scheduler');
  return { url, ...(given ? { token: given.token } : {}) };
}

/**
 * Refuses the value of any of `flags` that is no identity value, as a
 * scheduler would: its refusal names a request field or header, not the
 * flag. The protocol lib loads with the command's own modules anyway.
 */
async function checkIdentities(values: Readonly<Record<string, unknown>>, flags: readonly string[]): Promise<void> {
  const { isIdentityValue } = await import('@switchyard/protocol');
  for (const flag of flags) {
    const value = values[flag];
    if (value !== undefined && !isIdentityValue(value)) {
      throw new UsageError(`--${flag} must be ${IDENTITY_RULE}, got ${JSON.stringify(value)}`);
    }
  }
}

/** `check scheduler` and `check gateway`: 0 when what they check answers as it should; a failure throws, saying why. */
async function check(argv: readonly string[]): Promise<number> {
  const [what, ...args] = argv;
  if (what === 'scheduler') {
    const { values } = parseArgs({
      args,
      options: {
        scheduler: { type: 'string' },
        replica: { type: 'string', multiple: true },
        token: { type: 'string' },
        'token-file': { type: 'string' },
        'wait-seconds': { type: 'string' },
      },
    });
    const target = await schedulerTarget(values);
    const replicas = (values.replica ?? []).map((url) => schedulerUrl(url, '--replica'));
    const waitMs = 1000 * seconds(values['wait-seconds'], 30, '--wait-seconds');
    const { checkScheduler } = await import('./check-scheduler.ts');
    await print(process.stdout, await checkScheduler({ ...target, replicas, waitMs }));
    return 0;
  }
  if (what === 'gateway') {
    const { values } = parseArgs({
      args,
      options: { gateway: { type: 'string' }, 'auth-required': { type: 'boolean', default: false } },
    });
    const url = schedulerUrl(values.gateway ?? 'http://127.0.0.1:8080/mcp', '--gateway');
    const { checkGateway } = await import('./check-gateway.ts');
    await print(process.stdout, await checkGateway({ url, authRequired: values['auth-required'] }));
    return 0;
  }
  throw new UsageError(`unknown check: ${what ?? '(none)'}; check scheduler or check gateway`);
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // Help wherever it is asked for: `switchyard -h`, `switchyard status --help` (that command's own). Asked of a
  // command that does not exist, it is that bad usage, as without --help: the switch below says so.
  if (argv.some((arg) => arg === '--help' || arg === '-h')) {
    const help = commandHelp(argv.slice(0, 2));
    if (help !== undefined || command!.startsWith('-')) {
      await print(process.stdout, help ?? OVERVIEW);
      return 0;
    }
  }
  switch (command) {
    case 'up': {
      const { values } = parseArgs({
        args: rest,
        options: {
          processes: { type: 'boolean', default: false },
          'gateway-port': { type: 'string' },
          'scheduler-port': { type: 'string' },
          'log-level': { type: 'string', default: 'warn' },
        },
      });
      const logLevel = values['log-level'];
      if (!['fatal', 'error', 'warn', 'info', 'debug'].includes(logLevel)) {
        throw new UsageError(`--log-level must be one of fatal, error, warn, info, debug`);
      }
      const options = {
        processes: values.processes,
        gatewayPort: port(values['gateway-port'], 8080, '--gateway-port'),
        schedulerPort: port(values['scheduler-port'], 7070, '--scheduler-port'),
        logLevel: logLevel as 'warn',
      };
      const { up } = await import('./up.ts');
      await up(options);
      return 0;
    }
    case 'status': {
      const { values } = parseArgs({
        args: rest,
        options: { scheduler: { type: 'string' }, token: { type: 'string' }, 'token-file': { type: 'string' } },
      });
      const target = await schedulerTarget(values);
      const { status } = await import('./inspect.ts');
      await print(process.stdout, await status(target));
      return 0;
    }
    case 'explain': {
      const { values } = parseArgs({
        args: rest,
        options: {
          scheduler: { type: 'string' },
          token: { type: 'string' },
          'token-file': { type: 'string' },
          class: { type: 'string' },
          process: { type: 'string' },
          thread: { type: 'string' },
        },
      });
      if (!values.class || !values.process) throw new UsageError('explain needs --class and --process');
      const target = await schedulerTarget(values);
      await checkIdentities(values, ['class', 'process', 'thread']);
      const { explain } = await import('./inspect.ts');
      const result = await explain(target, {
        class: values.class,
        processId: values.process,
        ...(values.thread !== undefined ? { threadId: values.thread } : {}),
      });
      await print(process.stdout, result.text);
      return result.ok ? 0 : 1;
    }
    case 'runtime': {
      const [sub, ...args] = rest;
      if (sub !== 'join') throw new UsageError(`unknown runtime command: ${sub ?? '(none)'}`);
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: {
          token: { type: 'string' },
          'token-file': { type: 'string' },
          id: { type: 'string' },
          class: { type: 'string', multiple: true },
          config: { type: 'string' },
          sandboxes: { type: 'string' },
          'wait-seconds': { type: 'string' },
        },
      });
      const given = await givenToken(values, 'SWITCHYARD_JOIN_TOKEN');
      if (positionals.length === 0 || !given) {
        throw new UsageError('runtime join needs <scheduler-url> and --token, --token-file or SWITCHYARD_JOIN_TOKEN');
      }
      const [first, ...fallbacks] = positionals.map((url) => schedulerUrl(url, '<scheduler-url>'));
      await checkIdentities(values, ['id']);
      // --config serves the file's classes in place of the default demo, or beside those --class names.
      const classes = joinClasses(values.class ?? (values.config === undefined ? ['demo'] : []));
      const configClasses = values.config === undefined ? {} : await joinConfigClasses(values.config, classes);
      const options = {
        schedulerUrl: first!,
        fallbackSchedulerUrls: fallbacks,
        token: given.token,
        tokenSource: given.source,
        ...(values.id !== undefined ? { id: values.id } : {}),
        classes,
        configClasses,
        sandboxesMax: positiveInteger(values.sandboxes, 100, '--sandboxes'),
        waitMs: 1000 * seconds(values['wait-seconds'], 30, '--wait-seconds'),
      };
      const { joinRuntime } = await import('./join.ts');
      return joinRuntime(options);
    }
    case 'check':
      return check(rest);
    case undefined:
      // Bad usage like an unknown command: a script that lost its command must not pass for one that ran.
      throw new UsageError('no command given; switchyard --help lists them');
    case 'help': {
      const words = rest.filter((arg) => !arg.startsWith('-')).slice(0, 2);
      const help = words.length === 0 ? OVERVIEW : commandHelp(words);
      if (help === undefined) throw new UsageError(`unknown command: ${words.join(' ')}`);
      await print(process.stdout, help);
      return 0;
    }
    default:
      throw new UsageError(`unknown command: ${command}`);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  async (error: unknown) => {
    // Every mistake parseArgs finds (an unknown option, a missing value, a value given to a flag) is bad usage.
    if (error instanceof UsageError || String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS_')) {
      await print(process.stderr, `switchyard: ${(error as Error).message}\n${usageOf(process.argv.slice(2))}`);
      process.exit(2);
    }
    // A config file it cannot use (runtime join --config), told as the app it is shared with tells it: the problems
    // are the whole story, and exit code 2, as for a refused config.
    if ((error as Error).name === 'ConfigError') {
      await print(process.stderr, `switchyard: ${(error as Error).message}`);
      process.exit(2);
    }
    await print(process.stderr, `switchyard: ${(error as Error).message}`);
    process.exit(1);
  },
);
