import type { EngineConfig, SandboxHost, SandboxTrouble } from '@switchyard/sandbox';
import type { Metrics } from '@switchyard/service';

type EngineKind = EngineConfig['engine'];

/** What each kind of sandbox trouble is counted in, and the engines whose classes can have it (all when absent). */
const TROUBLE_COUNTERS: Record<SandboxTrouble, { name: string; help: string; engines?: readonly EngineKind[] }> = {
  stdin_refused: {
    name: 'stdio_messages_refused_total',
    help: 'Messages refused to a stdio server because more than 16 MiB of its stdin waited unread',
    engines: ['stdio'],
  },
  stdin_stalled: {
    name: 'stdio_servers_stalled_total',
    help: 'stdio servers stopped as stuck: past 16 MiB of stdin unread, and none of it read for 60 s',
    engines: ['stdio'],
  },
  died: {
    name: 'sandboxes_died_total',
    help: 'Sandboxes that died on their own (their server exited, was killed, or was stopped as stuck), warm pool excluded',
  },
  answer_too_large: {
    name: 'http_answers_cut_total',
    help: "Answers of an http class's upstream (a JSON body or one SSE event) cut for being past 10 MiB; each failed its request",
    engines: ['http'],
  },
};

/**
 * Counters of sandbox trouble labelled by class (configured, so few; never
 * by sandbox), and the function that counts it (the sandbox host's
 * `onTrouble`). Each class that can have a kind of trouble starts at 0, so
 * a rate over it needs no first event.
 */
export function troubleCounters(
  metrics: Metrics,
  classes: Readonly<Record<string, EngineConfig>>,
): (trouble: SandboxTrouble, className: string) => void {
  const counters = new Map(
    Object.entries(TROUBLE_COUNTERS).map(([trouble, spec]) => {
      const counter = metrics.counter({ name: spec.name, help: spec.help, labelNames: ['class'] });
      for (const [name, config] of Object.entries(classes)) {
        if (!spec.engines || spec.engines.includes(config.engine)) counter.inc({ class: name }, 0);
      }
      return [trouble as SandboxTrouble, counter] as const;
    }),
  );
  return (trouble, className) => counters.get(trouble)?.inc({ class: className });
}

/**
 * The counter of tool calls clients cancelled, by class (each from 0), and
 * the function that counts one (the sandbox host's `onCancelled`).
 */
export function cancelledCounter(
  metrics: Metrics,
  classes: Readonly<Record<string, EngineConfig>>,
): (className: string) => void {
  const counter = metrics.counter({
    name: 'tool_calls_cancelled_total',
    help: 'Tool calls cancelled by their clients',
    labelNames: ['class'],
  });
  for (const name of Object.keys(classes)) counter.inc({ class: name }, 0);
  return (className) => counter.inc({ class: className });
}

/** Gauges read from the node at each scrape. */
export function registerNodeMetrics(
  metrics: Metrics,
  host: Pick<SandboxHost, 'stats'>,
  connected: () => boolean,
): void {
  metrics.gauge({
    name: 'tunnel_connected',
    help: '1 while the tunnel to a scheduler is open, else 0',
    collect: () => (connected() ? 1 : 0),
  });
  metrics.gauge({
    name: 'sandboxes',
    help: 'Sandboxes alive (warm pool excluded)',
    collect: () => host.stats().sandboxes,
  });
  metrics.gauge({ name: 'sessions', help: 'Legacy MCP sessions open', collect: () => host.stats().sessions });
  metrics.gauge({
    name: 'event_streams',
    help: "Event streams being answered: sessions' GET streams, calls' SSE answers, listen streams",
    collect: () => host.stats().eventStreams,
  });
  // Deprecated: a count kept as a gauge, as earlier releases exposed it; tool_calls_cancelled_total replaces it.
  metrics.gauge({
    name: 'tool_calls_cancelled',
    help: 'Tool calls cancelled by clients so far (deprecated: use tool_calls_cancelled_total)',
    collect: () => host.stats().cancelled,
  });
}
