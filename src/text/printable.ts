/*
 * The one neutraliser of text that a tenant, a bank or a receiver supplied, wherever a person reads it: the
 * CLI's output (cli/views), the logs' pretty lines (logging/pretty.ts) and every page of the HTML kit
 * (html/html.ts: the console, the widget). Each character below is shown as its escape (`\u202e`) instead
 * of acting:
 *
 * - C0 and C1 controls and DEL: on a terminal an escape sequence can clear the screen, retitle the window,
 *   rewrite earlier lines or hide text; a carriage return or a newline can forge a row.
 * - The bidirectional controls (U+202A–U+202E embeddings and overrides, U+2066–U+2069 isolates, U+200E/F
 *   and U+061C marks): U+202E makes `evil‮gpj.exe` read `evilexe.jpg`, on a terminal and in a browser alike.
 * - The zero-width and invisible characters (U+200B–U+200D, U+2060–U+2064, U+FEFF, U+180E, U+034F, the
 *   Hangul fillers U+115F/U+1160/U+3164/U+FFA0, and the tag characters U+E0000–U+E007F that can carry a
 *   whole hidden text): two names that look the same, or a name that hides a word. The zero-width joiner
 *   between two pictographs is kept, as are tags after a black flag: they are how emoji sequences are
 *   written (👩‍💻, 🏴󠁧󠁢󠁳󠁣󠁴󠁿), and they join glyphs the reader sees. Astral characters show as `\u{e0041}`.
 * - The line and paragraph separators (U+2028/9), which some terminals and editors break lines at.
 *
 * `--json` output is never passed through here: the value stays exact there.
 */

const UNPRINTABLE =
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  /[\u0000-\u001f\u007f-\u009f\u061c\u115f\u1160\u180e\u200b\u200c\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\u3164\ufeff\uffa0]|\u034f|(?<!\p{Extended_Pictographic}|[\u{1F3FB}-\u{1F3FF}]|\uFE0F)\u200d|\u200d(?!\p{Extended_Pictographic})|(?<!\u{1F3F4}[\u{E0020}-\u{E007E}]*)[\u{E0000}-\u{E007F}]/gu;
/** What `multiline` lets through: the layout of the caller's own text. */
const LAYOUT = new Set(['\n', '\t']);

/**
 * `text` with every character above shown as its escape (`\u001b`, `\u202e`). With `multiline`, newlines
 * and tabs pass (the CLI's own lines; a page's text, where they are only white space).
 */
export function printable(text: string, multiline = false): string {
  return text.replace(UNPRINTABLE, (char) => {
    if (multiline && LAYOUT.has(char)) return char;
    const code = char.codePointAt(0)!;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
