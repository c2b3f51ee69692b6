import {
  TOOL_CALL_OUTCOMES,
  type EngineConfig,
  type SandboxHost,
  type SandboxTrouble,
  type ToolCallOutcome,
  type ToolCallSink,
} from '@switchyard/sandbox';
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

/**
 * Bounds of the tool call duration histogram, seconds. Calls of a builtin
 * or a local stdio server take a millisecond or less, those of a remote
 * server tens to hundreds; real tools (a search, a build, a model) run for
 * seconds to minutes, up to the 10 min an upstream call may last. Bounds
 * about 2.5× apart keep a p99 within a bucket's error from 1 ms to 10 min,
 * in 18 series per class.
 */
const TOOL_CALL_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
] as const;

/**
 * The counter of tool calls by class and outcome and the histogram of their
 * durations by class (each series from 0), and the function that counts one
 * (the sandbox host's `onToolCall`). Never labelled by tool: an upstream
 * names its tools, as many as it likes. The label sets are made once per
 * class, so a call costs two lookups and prom-client's own work.
 */
export function toolCallMetrics(metrics: Metrics, classes: Readonly<Record<string, EngineConfig>>): ToolCallSink {
  const calls = metrics.counter({
    name: 'tool_calls_total',
    help: 'Tool calls served, by outcome: ok, error (an isError result or a JSON-RPC error), cancelled (by their clients)',
    labelNames: ['class', 'outcome'],
  });
  const durations = metrics.histogram({
    name: 'tool_call_duration_seconds',
    help: 'Seconds from the start of a tool call to its result, error or cancellation',
    labelNames: ['class'],
    buckets: TOOL_CALL_BUCKETS,
  });
  const byClass = new Map<
    string,
    { readonly outcomes: OutcomeLabels; readonly durations: { observe(s: number): void } }
  >();
  for (const name of Object.keys(classes)) {
    const outcomes = Object.fromEntries(
      TOOL_CALL_OUTCOMES.map((outcome) => [outcome, { class: name, outcome }]),
    ) as OutcomeLabels;
    for (const outcome of TOOL_CALL_OUTCOMES) calls.inc(outcomes[outcome], 0);
    durations.zero({ class: name });
    // A histogram's child keeps its observer; histogram.observe(labels, s) makes one per call.
    byClass.set(name, { outcomes, durations: durations.labels({ class: name }) });
  }
  return (className, outcome, seconds) => {
    const of = byClass.get(className);
    if (!of) return;
    calls.inc(of.outcomes[outcome]);
    of.durations.observe(seconds);
  };
}

type OutcomeLabels = Readonly<Record<ToolCallOutcome, Record<'class' | 'outcome', string>>>;

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
  // A name of its own, not a class label on `sandboxes`: queries on that one's single series keep working.
  metrics.gauge({
    name: 'class_sandboxes',
    help: 'Sandboxes alive by class (warm pool excluded), every configured class from 0',
    labelNames: ['class'],
    collect: () =>
      Object.entries(host.stats().sandboxesByClass).map(([name, value]) => ({ labels: { class: name }, value })),
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
