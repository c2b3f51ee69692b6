/** The path a runtime dials under a scheduler's base URL (docs/protocol.md §1). */
const CONNECT_PATH = '/api/runtime/connect';

/**
 * The scheduler URLs given to `runtime join`, as its lines name them. The
 * runtime logs the connect URL it dialled; a line names the base URL the
 * operator typed, or all of them (`A or B`) when the entry names none.
 */
export class JoinUrls {
  readonly all: readonly string[];
  readonly #byConnectUrl = new Map<string, string>();

  /** `all`: the first is dialled first, the others when a dial fails. */
  constructor(all: readonly string[]) {
    this.all = all;
    for (const url of all) this.#byConnectUrl.set(connectHref(url), url);
  }

  /** Every URL given, for a line about no dial in particular. */
  get label(): string {
    return this.all.join(' or ');
  }

  /** The URL given whose connect URL is `dialled`, else the label. */
  given(dialled: string | undefined): string {
    return (dialled !== undefined && this.#byConnectUrl.get(dialled)) || this.label;
  }
}

/** `base` with the connect path appended, as the runtime's dialer writes it in its log. */
function connectHref(base: string): string {
  const url = new URL(base);
  url.pathname = url.pathname.replace(/\/+$/, '') + CONNECT_PATH;
  return url.href;
}
