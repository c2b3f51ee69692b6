// What the PrometheusRule tests (prometheus-rules.test.ts) read in an alert's
// expression, by the Prometheus project's own grammar (lezer-promql): its
// selectors, its absent() calls and its aggregations.
import { parser } from '@prometheus-io/lezer-promql';

/** A metric selector of an expression: the metric's name and its label matchers as written (`namespace="x"`). */
export type Selector = { metric: string; matchers: string[] };

/** The selectors of a PromQL expression, by the Prometheus project's grammar; throws on a syntax error, saying where. */
export function selectorsOf(expr: string): Selector[] {
  const selectors: Selector[] = [];
  const errors: number[] = [];
  parser.parse(expr).iterate({
    enter(ref) {
      if (ref.type.isError) errors.push(ref.from);
      if (ref.name !== 'VectorSelector') return;
      const name = ref.node.getChild('Identifier');
      const matchers = ref.node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? [];
      selectors.push({
        metric: name ? expr.slice(name.from, name.to) : '',
        matchers: matchers.map((m) => expr.slice(m.from, m.to)),
      });
    },
  });
  if (errors.length > 0) {
    const where = errors.map((at) => `at ${at} (${JSON.stringify(expr.slice(at, at + 16))})`).join(', ');
    throw new Error(`PromQL syntax error ${where} in ${expr}`);
  }
  return selectors;
}

/** A label's value in each matcher `label="value"` (equality only) of a selector. */
export const equalities = (matchers: string[]): Map<string, string> =>
  new Map(
    matchers.flatMap((m) => {
      const e = /^([a-z_]+)="(.*)"$/.exec(m);
      return e ? [[e[1]!, e[2]!] as const] : [];
    }),
  );

/**
 * The absent() calls of a PromQL expression: the metric its argument selects, and the labels Prometheus gives
 * the one sample it returns when nothing matches: the argument's equality matchers when it is a bare selector
 * (`absent(x{job="a",pod=~".*"})` is `{job="a"}`), none when it is anything else (`absent(sum(x{job="a"}))`).
 */
export function absentsOf(expr: string): { metric: string; labels: Record<string, string> }[] {
  const calls: { metric: string; labels: Record<string, string> }[] = [];
  parser.parse(expr).iterate({
    enter(ref) {
      if (ref.name !== 'FunctionCall' || ref.node.getChild('FunctionIdentifier')?.firstChild?.name !== 'Absent') return;
      const argument = ref.node.getChild('FunctionCallBody')?.getChild('VectorSelector');
      if (!argument) return void calls.push({ metric: '', labels: {} });
      const name = argument.getChild('Identifier');
      const matchers = argument.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? [];
      calls.push({
        metric: name ? expr.slice(name.from, name.to) : '',
        labels: Object.fromEntries(equalities(matchers.map((m) => expr.slice(m.from, m.to)))),
      });
    },
  });
  return calls;
}

/** The labels each aggregation of a PromQL expression keeps (`sum by (a, b) (…)` keeps a and b; `sum(…)` none). */
export function groupingsOf(expr: string): string[][] {
  const groupings: string[][] = [];
  parser.parse(expr).iterate({
    enter(ref) {
      if (ref.name !== 'AggregateExpr') return;
      const labels = ref.node.getChild('AggregateModifier')?.getChild('GroupingLabels')?.getChildren('LabelName');
      groupings.push((labels ?? []).map((l) => expr.slice(l.from, l.to)));
    },
  });
  return groupings;
}
