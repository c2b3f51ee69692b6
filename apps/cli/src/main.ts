#!/usr/bin/env node
// The `switchyard` command. Until the cluster components exist, `up` says
// what is missing and exits non-zero rather than pretending to start.
const [command] = process.argv.slice(2);

if (command === 'up') {
  console.error(
    [
      'switchyard up: the local cluster is not built yet.',
      'Missing: the scheduler cluster, the runtime and the gateway apps.',
      'Run `npm test` to exercise what exists today.',
    ].join('\n'),
  );
  process.exit(1);
}
console.error('usage: switchyard up');
process.exit(2);
