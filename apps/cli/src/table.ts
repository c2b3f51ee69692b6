/** Renders rows as an aligned text table with a header line. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  // A loop, not Math.max(...rows): spread into arguments, a fleet of some 150,000 runtimes overflowed the stack.
  const widths = header.map((h) => h.length);
  for (const row of rows) {
    for (let i = 0; i < widths.length; i++) widths[i] = Math.max(widths[i]!, (row[i] ?? '').length);
  }
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
