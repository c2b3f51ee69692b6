// The `switchyard` command's help: the overview of every command (`switchyard
// --help`), each command's own (`switchyard status --help`), with its flags
// and an example, and what bad usage prints (the synopsis of the command it
// was given). One synopsis line per command serves all three, so they cannot
// drift apart.

/** Each command's synopsis, in the order the overview lists them. */
const SYNOPSES = {
  up: 'switchyard up [--processes] [--gateway-port 8080] [--scheduler-port 7070] [--log-level warn]',
  status: 'switchyard status [--scheduler http://127.0.0.1:7070] [--token <api token> | --token-file <file>]',
  explain:
    'switchyard explain --class <class> --process <id> [--thread <id>] [--scheduler <url>] [--token <api token> | --token-file <file>]',
  'runtime join':
    'switchyard runtime join <scheduler-url>... (--token <join token> | --token-file <file>) [--id <id>] [--class demo|everything]... [--config <file>] [--sandboxes 100] [--wait-seconds 30]',
  'check scheduler':
    'switchyard check scheduler [--scheduler <url>] [--replica <url>]... [--token <api token> | --token-file <file>] [--wait-seconds 30]',
  'check gateway': 'switchyard check gateway [--gateway http://127.0.0.1:8080/mcp] [--auth-required]',
} as const;

type Command = keyof typeof SYNOPSES;

/**
 * What an id given by flag must be, as the help and a refusal of a bad one
 * say it: the protocol's identity rule, which the command checks (with the
 * protocol lib, loaded only when a command runs) before any scheduler does.
 */
export const IDENTITY_RULE = '1-128 characters from [A-Za-z0-9._:@-]';

/** A `usage:` heading over the synopses of `commands`. */
function usageLines(commands: readonly Command[]): string {
  return `usage:\n${commands.map((name) => `  ${SYNOPSES[name]}`).join('\n')}`;
}

const ALL = Object.keys(SYNOPSES) as Command[];
const ONE_COMMAND = 'switchyard <command> --help describes one command.';

export const OVERVIEW = `${usageLines(ALL)}

status, explain and check scheduler: --token (or SWITCHYARD_API_TOKEN) is one of the scheduler's apiTokens,
when it sets any; --token-file reads the first of a file's tokens (one per line, as the chart's Secret holds them);
runtime join: --token (or SWITCHYARD_JOIN_TOKEN, out of sight of ps and shell history) is a join token, and
--token-file reads the first of a file's tokens as above; --wait-seconds bounds how long it dials before a
scheduler takes it (opens its /watch; a dial still in flight then is waited for); once joined, a scheduler
that goes away is dialled until Ctrl-C.
check: exits 0 when the replicas agree on a leader, term and epoch (scheduler), or /readyz and an MCP
initialize answer (gateway: 200, or 401 with a Bearer challenge under --auth-required); else 1, saying why.
${ONE_COMMAND}`;

const SCHEDULER_FLAGS = `  --scheduler <url>          a scheduler replica (default http://127.0.0.1:7070)
  --token <api token>        one of the scheduler's apiTokens, when it sets any (else SWITCHYARD_API_TOKEN)
  --token-file <file>        reads the first token of a file of one per line (blank lines and # comments skipped)`;

/** What each command does, its flags, and an example; printed after its synopsis. */
const DETAILS: Record<Command, string> = {
  up: `Brings up a whole cluster on this machine (3 schedulers on an in-memory lease, 1 gateway, 2 runtimes),
prints its summary and MCP URL once ready, and runs until Ctrl-C, which stops every component.

  --processes                runs each component as its own OS process (kill one to watch the failover)
  --gateway-port <port>      the gateway's port (default 8080; 0 picks a free one)
  --scheduler-port <port>    the first scheduler's port, the others follow (default 7070; 0 picks free ones)
  --log-level <level>        the components' log lines from this level up: fatal, error, warn, info, debug (default warn)

example:
  switchyard up --gateway-port 0 --scheduler-port 0`,
  status: `Prints the leader, term and epoch a scheduler holds, and the runtimes of its latest epoch.

${SCHEDULER_FLAGS}

example:
  switchyard status --scheduler http://127.0.0.1:7070`,
  explain: `Shows where a request of this identity would be scheduled on the current epoch, and why: the
candidates before and after each filter (a dry run; nothing is placed). Exits 1 when it is unschedulable.

  --class <class>            the request's class (required)
  --process <id>             its process id (required)
  --thread <id>              its thread id (an MCP session), for the thread fast path
                             (each ${IDENTITY_RULE}, as every identity value is)
${SCHEDULER_FLAGS}

example:
  switchyard explain --class demo --process my-sandbox`,
  'runtime join': `Joins this machine to a cluster as a runtime: dials the scheduler at <scheduler-url> (no inbound
port needed) and serves sandboxes until Ctrl-C; a scheduler that goes away once joined is dialled again.
Give a scheduler Service's URL, or, where no Service is in front of the replicas, each replica's URL: a dial
that fails moves on to the next, so a runtime whose replica goes away joins another.

  --token <join token>       one of the scheduler's joinTokens (else SWITCHYARD_JOIN_TOKEN, out of sight of ps)
  --token-file <file>        reads the first token of a file of one per line
  --id <id>                  the runtime's id, ${IDENTITY_RULE} (default: this machine's
                             host name), unique in the cluster: the replica holding a runtime that runs with
                             that id refuses it (pick another --id); another replica lets it take that one's
                             place, ending its sessions
  --class <class>            a class to serve, demo or everything; repeat for both (default demo, unless --config)
  --config <file>            serves the classes of a runtime config file (YAML or JSON), your own MCP servers,
                             beside those of --class: the file sets classes alone, checked as the runtime app
                             checks its file; a relative cwd is taken from join's directory
  --sandboxes <n>            how many sandboxes it holds at once (default 100)
  --wait-seconds <s>         how long it dials before a scheduler takes it, then exits 1 (default 30)

example:
  switchyard runtime join http://127.0.0.1:7070 --token-file join-token --class demo --class everything
  switchyard runtime join http://127.0.0.1:7070 --token-file join-token --config my-classes.yaml`,
  'check scheduler': `Checks that a cluster's scheduler replicas answer and agree on one leader, term and epoch, as a
chart's helm test does. Exits 0 when they agree, else 1 saying why; disagreement is read again a while.

${SCHEDULER_FLAGS}
  --replica <url>            also checks this replica's own URL; repeat for each
  --wait-seconds <s>         how long disagreement is read again before the check fails (default 30)

example:
  switchyard check scheduler --scheduler http://127.0.0.1:7070 --replica http://127.0.0.1:7071`,
  'check gateway': `Checks that a gateway serves, as a chart's helm test does: its /readyz answers 200, and an MCP
initialize at its MCP URL answers 200 (the session it opens is ended at once). Exits 0, else 1 saying why.

  --gateway <url>            the gateway's MCP URL (default http://127.0.0.1:8080/mcp)
  --auth-required            its client auth is on: expects 401 with a Bearer challenge, and refuses a 200

example:
  switchyard check gateway --gateway http://127.0.0.1:8080/mcp`,
};

function isCommand(name: string): name is Command {
  return Object.hasOwn(SYNOPSES, name);
}

/**
 * The help for the command `words` name (`['status']`, `['check', 'gateway']`):
 * its synopsis, flags and an example. For `check` or `runtime` alone, every
 * command under it. Undefined for no command or one that is not known (a
 * word after `check` or `runtime` that names none under it, too).
 */
export function commandHelp(words: readonly string[]): string | undefined {
  const [first, second] = words;
  if (first === undefined) return undefined;
  const named = [first, `${first} ${second}`].filter(isCommand);
  const group = Object.keys(SYNOPSES).filter((name): name is Command => name.startsWith(`${first} `));
  if (named.length === 0 && second !== undefined && !second.startsWith('-')) return undefined;
  const commands = named.length > 0 ? named.slice(-1) : group;
  if (commands.length === 0) return undefined;
  return commands.map((name) => `usage:\n  ${SYNOPSES[name]}\n\n${DETAILS[name]}`).join('\n\n');
}

/**
 * What bad usage prints under the line saying what is wrong: the synopsis of
 * the command `words` (the command line) name, or of every command under
 * `check` or `runtime` when the word after names none, and where its flags
 * are described. The overview's notes would bury the line that matters; for
 * no command it knows, every synopsis, which is the list of commands.
 */
export function usageOf(words: readonly string[]): string {
  const [first = '', second] = words;
  const named = [first, `${first} ${second}`].filter(isCommand).slice(-1);
  const commands = named.length > 0 ? named : ALL.filter((name) => name.startsWith(`${first} `));
  if (commands.length === 0) return `${usageLines(ALL)}\n${ONE_COMMAND}`;
  const asked = commands.length === 1 ? commands[0] : first;
  return `${usageLines(commands)}\nswitchyard ${asked} --help describes each flag.`;
}
