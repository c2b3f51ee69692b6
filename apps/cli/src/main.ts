#!/usr/bin/env node
// The `switchyard` command: a local cluster, cluster status, scheduling
// explanations, and joining a runtime from any machine.
import { parseArgs } from 'node:util';
import { explain, status, type SchedulerTarget } from './inspect.ts';
import { joinRuntime } from './join.ts';
import { up } from './up.ts';

const USAGE = `usage:
  switchyard up [--processes] [--gateway-port 8080] [--scheduler-port 7070] [--log-level warn]
  switchyard status [--scheduler http://127.0.0.1:7070] [--token <api token>]
  switchyard explain --class <class> --process <id> [--thread <id>] [--scheduler <url>] [--token <api token>]
  switchyard runtime join <scheduler-url> --token <token> [--id <id>] [--class <name>]... [--sandboxes 100]

status and explain: --token (or SWITCHYARD_API_TOKEN) is one of the scheduler's apiTokens, when it sets any;
runtime join: --token is a join token.`;

function port(value: string | undefined, fallback: number, flag: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${flag} must be a port number, got ${value}`);
  return n;
}

class UsageError extends Error {}

/** The replica `status` and `explain` ask. */
function schedulerTarget(values: { scheduler?: string | undefined; token?: string | undefined }): SchedulerTarget {
  const token = values.token ?? process.env.SWITCHYARD_API_TOKEN;
  return { url: values.scheduler ?? 'http://127.0.0.1:7070', ...(token ? { token } : {}) };
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
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
      await up({
        processes: values.processes,
        gatewayPort: port(values['gateway-port'], 8080, '--gateway-port'),
        schedulerPort: port(values['scheduler-port'], 7070, '--scheduler-port'),
        logLevel: logLevel as 'warn',
      });
      return 0;
    }
    case 'status': {
      const { values } = parseArgs({
        args: rest,
        options: { scheduler: { type: 'string' }, token: { type: 'string' } },
      });
      console.log(await status(schedulerTarget(values)));
      return 0;
    }
    case 'explain': {
      const { values } = parseArgs({
        args: rest,
        options: {
          scheduler: { type: 'string' },
          token: { type: 'string' },
          class: { type: 'string' },
          process: { type: 'string' },
          thread: { type: 'string' },
        },
      });
      if (!values.class || !values.process) throw new UsageError('explain needs --class and --process');
      const result = await explain(schedulerTarget(values), {
        class: values.class,
        processId: values.process,
        ...(values.thread ? { threadId: values.thread } : {}),
      });
      console.log(result.text);
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
          id: { type: 'string' },
          class: { type: 'string', multiple: true },
          sandboxes: { type: 'string' },
        },
      });
      if (positionals.length !== 1 || !values.token)
        throw new UsageError('runtime join needs <scheduler-url> and --token');
      await joinRuntime({
        schedulerUrl: positionals[0]!,
        token: values.token,
        ...(values.id ? { id: values.id } : {}),
        classes: values.class ?? ['demo'],
        sandboxesMax: Number(values.sandboxes ?? 100),
      });
      return 0;
    }
    case undefined:
    case 'help':
    case '--help':
      console.log(USAGE);
      return 0;
    default:
      throw new UsageError(`unknown command: ${command}`);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      console.error(`switchyard: ${(error as Error).message}\n${USAGE}`);
      process.exit(2);
    }
    console.error(`switchyard: ${(error as Error).message}`);
    process.exit(1);
  },
);
