/** The width to lay text out in: the terminal's, else `COLUMNS`, else 100; never under 60. */
export function outputWidth(
  stream: { columns?: number } = process.stdout,
  env: NodeJS.ProcessEnv = process.env,
): number {
  const width = stream.columns || Number(env.COLUMNS) || 100;
  return Math.max(60, Math.floor(width));
}

/**
 * `text` broken into lines of at most `width` characters, at spaces where it can be; a word longer than the
 * width (a path, a URL) is cut, since a line the terminal wraps by itself loses the indentation.
 */
export function wrapText(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    let rest = word;
    while (rest.length > 0) {
      const room = line === '' ? width : width - line.length - 1;
      if (rest.length <= room) {
        line = line === '' ? rest : `${line} ${rest}`;
        rest = '';
      } else if (line !== '') {
        lines.push(line);
        line = '';
      } else {
        lines.push(rest.slice(0, width));
        rest = rest.slice(width);
      }
    }
  }
  if (line !== '' || lines.length === 0) lines.push(line);
  return lines;
}
