import type { RuntimeState } from '@switchyard/protocol';

/** A runtime state owned by `owner` with the given `process/thread` pairs. */
export function runtimeState(id: string, owner: string, threads: readonly string[] = [], generation = 1): RuntimeState {
  const refs = threads.map((t) => {
    const [process, thread] = t.split('/') as [string, string];
    return { process, thread };
  });
  return {
    runtime: {
      id,
      classes: ['default'],
      metadata: {},
      version: '1.0.0',
      idleWeight: { sandboxes: 4 },
      available: true,
      owner,
      generation,
    },
    processes: [...new Set(refs.map((r) => r.process))],
    threads: refs,
  };
}
