// Every `switchyard` command line in the README and docs/*.md uses a command
// and flags the CLI's usage text lists for that command (`npm start -- …` is
// `switchyard up …`, `npm run switchyard -- …` is `switchyard …`).
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '../..');
const DOCS = ['README.md', ...readdirSync(join(root, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));
const usage = execFileSync(process.execPath, [join(root, 'apps/cli/src/main.ts'), '--help'], { encoding: 'utf8' });

/** Usage lines by command (`up`, `status`, `runtime join`, …). */
const COMMANDS = new Map(
  [...usage.matchAll(/^ {2}switchyard ((?:[a-z]+ ?)+?)(?= [[<-]|$)(.*)$/gm)].map((m) => [m[1]!.trim(), m[2]!]),
);

/** Each documented command line: the command and the flags given to it. */
function documentedLines(): { where: string; command: string; flags: string[] }[] {
  const found = [];
  for (const file of DOCS) {
    const lines = readFileSync(join(root, file), 'utf8').split('\n');
    for (const [i, line] of lines.entries()) {
      const pattern =
        /(?:npm start --|npm run switchyard --|(?<![\w/-])switchyard)((?: [a-z]+)*)((?: --?[a-z][\w-]*(?:[ =](?!--)[^\s`#]+)?)*)/g;
      for (const m of line.matchAll(pattern)) {
        const words = m[1]!.trim();
        const command = m[0].startsWith('npm start') ? `up ${words}`.trim() : words;
        if (command === '') continue;
        found.push({
          where: `${file}:${i + 1}`,
          command,
          flags: [...m[2]!.matchAll(/(?<= )--?[a-z][\w-]*/g)].map((f) => f[0]),
        });
      }
    }
  }
  return found;
}

it('reads the usage text and the documented command lines (the check below has something to compare)', () => {
  assert.deepEqual([...COMMANDS.keys()].sort(), [
    'check gateway',
    'check scheduler',
    'explain',
    'runtime join',
    'status',
    'up',
  ]);
  assert.ok(documentedLines().filter((l) => l.flags.length > 0).length >= 5);
});

it('documented switchyard command lines use commands and flags the usage text lists', () => {
  const wrong = [];
  for (const line of documentedLines()) {
    // Prose such as "switchyard up brings up…" names a command and no flags; it is checked only when it has flags.
    const usageLine = COMMANDS.get(line.command) ?? [...COMMANDS].find(([c]) => line.command.startsWith(`${c} `))?.[1];
    if (usageLine === undefined) {
      if (line.flags.length > 0) wrong.push(`${line.where}: no command '${line.command}'`);
      continue;
    }
    for (const flag of line.flags) {
      // Every command takes --help (its own help), which its usage line does not list.
      if (flag === '--help' || flag === '-h') continue;
      if (!new RegExp(`\\[?${flag}\\b`).test(usageLine)) wrong.push(`${line.where}: ${line.command} has no ${flag}`);
    }
  }
  assert.deepEqual(wrong, []);
});
