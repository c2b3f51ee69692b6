import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type AppName = 'gateway' | 'scheduler' | 'runtime';

interface MetricSpec<L extends string> {
  /** Name without the app prefix, e.g. `schedule_requests_total`. */
  readonly name: string;
  readonly help: string;
  /** Bounded label sets only: never a session, process or request id. */
  readonly labelNames?: readonly L[];
}

/** One label set's value, as a labelled gauge's `collect` reads it. */
export interface GaugeSample<L extends string> {
  readonly labels: Readonly<Record<L, string>>;
  readonly value: number;
}

/** A gauge's reading: a number (unlabelled), or every label set's value (labelled). */
type GaugeReading<L extends string> = number | readonly GaugeSample<L>[];

export interface Metrics {
  readonly registry: Registry;
  /** `switchyard_<app>_`. */
  readonly prefix: string;
  counter<L extends string = string>(spec: MetricSpec<L>): Counter<L>;
  /**
   * `collect` runs on every scrape, to set the gauge from a live source (a promise is awaited). For a
   * labelled gauge it gives every label set's value: those it leaves out are dropped from that scrape on.
   */
  gauge<L extends string = string>(
    spec: MetricSpec<L> & { readonly collect?: () => GaugeReading<L> | Promise<GaugeReading<L>> },
  ): Gauge<L>;
  histogram<L extends string = string>(spec: MetricSpec<L> & { readonly buckets?: readonly number[] }): Histogram<L>;
}

const NAME = /^[a-z][a-z0-9_]*$/;

/**
 * How often the event-loop delay histogram (`nodejs_eventloop_lag_p99_seconds`
 * and its siblings) samples, in ms. prom-client's default of 10 ms wakes every
 * idle process 100 times a second: an idle gateway of `switchyard up
 * --processes` spent about 5 ms of CPU a second with it and 2 ms at 100 ms,
 * a runtime 5–6 against 2–3. A stall of 100 ms or more still lands in the
 * histogram every time, a shorter one in proportion to its length.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * A registry of its own (never prom-client's global one, so several apps can
 * share one test process) holding the default process metrics and every
 * metric made through the helpers, all named `switchyard_<app>_…`.
 */
export function createMetrics(app: AppName): Metrics {
  const registry = new Registry();
  const prefix = `switchyard_${app}_`;
  collectDefaultMetrics({ register: registry, prefix, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  const full = (name: string): string => {
    if (!NAME.test(name) || name.startsWith('switchyard_')) {
      throw new TypeError(`metric name '${name}' must be snake_case without the switchyard_ prefix`);
    }
    return prefix + name;
  };
  return {
    registry,
    prefix,
    counter: (spec) =>
      new Counter({ name: full(spec.name), help: spec.help, labelNames: spec.labelNames ?? [], registers: [registry] }),
    gauge: (spec) => {
      const read = spec.collect;
      return new Gauge({
        name: full(spec.name),
        help: spec.help,
        labelNames: spec.labelNames ?? [],
        registers: [registry],
        ...(read
          ? {
              collect(this: Gauge) {
                const apply = (reading: GaugeReading<string>): void => {
                  if (typeof reading === 'number') return void this.set(reading);
                  this.reset();
                  for (const { labels, value } of reading) this.set(labels, value);
                };
                const reading = read();
                if (reading instanceof Promise) return reading.then(apply);
                apply(reading);
              },
            }
          : {}),
      });
    },
    histogram: (spec) =>
      new Histogram({
        name: full(spec.name),
        help: spec.help,
        labelNames: spec.labelNames ?? [],
        ...(spec.buckets ? { buckets: [...spec.buckets] } : {}),
        registers: [registry],
      }),
  };
}

/** Serves the text exposition of `registry` (e.g. at `/metrics`); a collect failure is a 500. */
export function metricsHandler(registry: Registry): (req: IncomingMessage, res: ServerResponse) => void {
  return (_req, res) => {
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType });
        res.end(text);
      },
      () => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end('metrics collection failed\n');
      },
    );
  };
}
