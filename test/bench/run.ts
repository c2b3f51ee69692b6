// `npm run bench -- <suite>` runs test/bench/<suite>/main.ts; with no suite,
// every suite in turn. Each suite is its own process so one suite's heap and
// JIT state cannot colour another's figures. Suites end by printing one JSON
// line per headline figure (see report.ts).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const here = import.meta.dirname;
const available = readdirSync(here, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(here, d.name, 'main.ts')))
  .map((d) => d.name)
  .sort();

const requested = process.argv.slice(2);
const unknown = requested.filter((s) => !available.includes(s));
if (unknown.length > 0) {
  console.error(`unknown bench suite: ${unknown.join(', ')}; available: ${available.join(', ') || '(none)'}`);
  process.exit(2);
}

let failed = 0;
for (const suite of requested.length > 0 ? requested : available) {
  console.error(`\n=== bench ${suite}`);
  const result = spawnSync(process.execPath, ['--expose-gc', join(here, suite, 'main.ts')], { stdio: 'inherit' });
  if (result.status !== 0) {
    failed++;
    console.error(`bench ${suite} failed (exit ${result.status ?? result.signal})`);
  }
}
process.exit(failed > 0 ? 1 : 0);
