import type { Runtime, RuntimeState } from '@switchyard/protocol';

/**
 * `runtime` as API answers show it: without its join token fingerprint and its instance, which replicas
 * share with their peers only. Whoever reads the API (open to whoever reaches the port where no API
 * tokens are set) could test guesses of a weak token against the fingerprint offline. The instance is a
 * detail between replicas; hiding it is no security boundary: the instance check guards against one id
 * given to two runtimes, and a join token holder naming no instance (as an earlier release) is not checked.
 */
export function publicRuntime(runtime: Runtime): Runtime {
  if (runtime.tokenFingerprint === undefined && runtime.instance === undefined) return runtime;
  const { tokenFingerprint: _peersOnly, instance: _peersOnlyToo, ...shown } = runtime;
  return shown;
}

/** `state` with its runtime as `publicRuntime` shows it. */
export function publicState(state: RuntimeState): RuntimeState {
  const runtime = publicRuntime(state.runtime);
  return runtime === state.runtime ? state : { ...state, runtime };
}
