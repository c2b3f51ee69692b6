// What the PrometheusRule tests (prometheus-rules.test.ts) read in an alert's
// expression, by the Prometheus project's own grammar (lezer-promql): its
// selectors, its absent() calls, its aggregations, and the labels its result
// carries.
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

/** An aggregation as written: `sum by (a, b) (…)` is by a and b, `max without (c) (…)` without c, `sum(…)` neither. */
export type Aggregation = { op: string; by?: string[]; without?: string[] };

/** The aggregations of a PromQL expression (sum, max, count, topk, …), outermost first. */
export function aggregationsOf(expr: string): Aggregation[] {
  const aggregations: Aggregation[] = [];
  parser.parse(expr).iterate({
    enter(ref) {
      if (ref.name !== 'AggregateExpr') return;
      const op = ref.node.getChild('AggregateOp');
      const modifier = ref.node.getChild('AggregateModifier');
      const labels = (modifier?.getChild('GroupingLabels')?.getChildren('LabelName') ?? []).map((l) => text(expr, l));
      const kind = modifier?.firstChild?.name === 'Without' ? 'without' : 'by';
      aggregations.push({ op: op ? text(expr, op) : '', ...(modifier ? { [kind]: labels } : {}) });
    },
  });
  return aggregations;
}

type Node = ReturnType<typeof parser.parse>['topNode'];
const text = (expr: string, node: Node): string => expr.slice(node.from, node.to);
/** The expressions directly inside a node (its operands, its arguments). */
const exprsIn = (node: Node | null | undefined): Node[] => node?.getChildren('Expr') ?? [];

/**
 * The labels every sample of a PromQL expression's result is sure to carry (an alert fired from it carries them
 * too), by Prometheus' rules; null for a scalar. A selector's series carry its equality matchers' labels. An
 * aggregation keeps only its `by` labels, or its input's less its `without` ones, or none (topk, bottomk and
 * limitk keep their input's). A function keeps its vector argument's; absent() gives its bare selector's
 * equality labels. With a number on one side, a binary operation keeps the other side's; between two vectors,
 * `and`/`unless` the left side's, `or` only those both sides carry, and any other the left side's (the right's
 * with group_right), only what on() names in a one-to-one match, less what ignoring() names.
 */
export function resultLabels(expr: string): Set<string> | null {
  const tree = parser.parse(expr);
  const top = exprsIn(tree.topNode)[0];
  if (!top) throw new Error(`no expression in ${expr}`);
  return labelsOf(expr, top);
}

function labelsOf(expr: string, node: Node): Set<string> | null {
  const inner = exprsIn(node);
  switch (node.name) {
    case 'NumberDurationLiteral':
    case 'StringLiteral':
      return null;
    case 'VectorSelector':
      return selectorLabels(expr, node);
    case 'AggregateExpr':
      return aggregateLabels(expr, node);
    case 'FunctionCall':
      return functionLabels(expr, node);
    case 'BinaryExpr':
      return binaryLabels(expr, node, inner[0]!, inner[1]!);
    default:
      // A matrix selector, parentheses, a sign, offset, @, a subquery: its one expression's labels.
      if (inner.length !== 1) throw new Error(`${node.name} (${text(expr, node)}) is not read here`);
      return labelsOf(expr, inner[0]!);
  }
}

function selectorLabels(expr: string, selector: Node): Set<string> {
  const matchers = selector.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? [];
  // label="" matches series without the label.
  const equal = [...equalities(matchers.map((m) => text(expr, m)))].filter(([, value]) => value !== '');
  return new Set(equal.map(([label]) => label));
}

const KEEPING_INPUT_LABELS = new Set(['topk', 'bottomk', 'limitk', 'limit_ratio']);

function aggregateLabels(expr: string, node: Node): Set<string> {
  const args = exprsIn(node.getChild('FunctionCallBody'));
  const input = labelsOf(expr, args.at(-1)!) ?? new Set<string>();
  const { op, by, without } = aggregationsOf(text(expr, node))[0]!;
  if (KEEPING_INPUT_LABELS.has(op)) return input;
  if (by) return new Set(by.filter((label) => input.has(label)));
  if (without) return new Set([...input].filter((label) => !without.includes(label)));
  return new Set();
}

const SCALAR_FUNCTIONS = new Set(['Scalar', 'Time', 'Pi']);

function functionLabels(expr: string, node: Node): Set<string> | null {
  const name = node.getChild('FunctionIdentifier')?.firstChild?.name ?? '';
  const args = exprsIn(node.getChild('FunctionCallBody'));
  if (SCALAR_FUNCTIONS.has(name)) return null;
  if (name === 'Absent' || name === 'AbsentOverTime') {
    const selector = args[0]?.name === 'MatrixSelector' ? exprsIn(args[0])[0] : args[0];
    return selector?.name === 'VectorSelector' ? selectorLabels(expr, selector) : new Set();
  }
  // The first argument that is no literal is the vector the function maps (rate, clamp_min, histogram_quantile).
  const vector = args.find((arg) => arg.name !== 'NumberDurationLiteral' && arg.name !== 'StringLiteral');
  return vector ? labelsOf(expr, vector) : new Set();
}

function binaryLabels(expr: string, node: Node, left: Node, right: Node): Set<string> | null {
  const [l, r] = [labelsOf(expr, left), labelsOf(expr, right)];
  if (!l || !r) return l ?? r;
  const operator = left.nextSibling?.name;
  if (operator === 'Or') return new Set([...l].filter((label) => r.has(label)));
  if (operator === 'And' || operator === 'Unless') return l;
  const matching = node.getChild('MatchingModifierClause');
  const kind = matching?.firstChild?.name;
  const named = (matching?.getChild('GroupingLabels')?.getChildren('LabelName') ?? []).map((n) => text(expr, n));
  if (matching?.getChild('GroupRight')) return r;
  if (matching?.getChild('GroupLeft')) return l;
  if (kind === 'On') return new Set([...l].filter((label) => named.includes(label)));
  if (kind === 'Ignoring') return new Set([...l].filter((label) => !named.includes(label)));
  return l;
}

/** The outermost operation of an expression that is a binary one: its operator as written, on()'s labels, its sides. */
export type Binary = { operator: string; on?: string[]; left: string; right: string };

/** The outermost binary operation of a PromQL expression (`a unless on() b == 0` is `unless`), or null. */
export function outermostBinary(expr: string): Binary | null {
  const top = exprsIn(parser.parse(expr).topNode)[0];
  if (top?.name !== 'BinaryExpr') return null;
  const [left, right] = exprsIn(top);
  const matching = top.getChild('MatchingModifierClause');
  const on =
    matching?.firstChild?.name === 'On'
      ? (matching.getChild('GroupingLabels')?.getChildren('LabelName') ?? []).map((n) => text(expr, n))
      : undefined;
  return {
    operator: text(expr, left!.nextSibling!),
    ...(on ? { on } : {}),
    left: text(expr, left!),
    right: text(expr, right!),
  };
}
