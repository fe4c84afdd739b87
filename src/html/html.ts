/*
 * The one way to write markup (docs/architecture.md, "Pages: the HTML kit"). `html` is a tagged template:
 * what it interpolates is text, escaped, unless it is already `Html` (another `html` template's result), so
 * forgetting to escape cannot happen. Where a value lands is read from the template's fixed strings once per
 * template (and cached): a value in an attribute is escaped for the quotes around it; a value that could
 * only be unsafe there (an unquoted attribute, an event handler, a `<script>` or `<style>` element, a
 * comment, a tag's name) is refused when the template first runs; a plain string at the start of an
 * `href`, `src` or `action` must be a relative, http or https URL (`javascript:` is refused; an `<img>`'s
 * `src` may also be a `data:image/` URL).
 *
 * Text is also shown as it is: a control, bidi or zero-width character of a value in the page's text (or in
 * an attribute a person reads: `title`, `alt`, `placeholder`, `aria-label`) shows as its escape (`\u202e`),
 * as the CLI shows it (text/printable.ts, the one neutraliser), so no page can print a tenant's U+202E and
 * reverse what follows. A form field's `value` and a URL keep the exact value: a form sent back unchanged
 * must not rewrite what it edits. Markup's own text was neutralised when its template ran.
 *
 * The models: Go's html/template, lit's `html`, Rails' SafeBuffer. This folder imports nothing of the
 * application's but that leaf: the widget and the console both build on it.
 */

import { printable } from '../text/printable.js';

// Set by Html's static block: only this module makes markup.
let make: (markup: string) => Html;
/** Whether `value` is markup of this kit (a look-alike object or a string never is). */
export let isHtml: (value: unknown) => value is Html;

/** Markup: made only by `html`, `join`, `jsonScript` and the named escape hatch `trustedHtml`. */
export class Html {
  readonly #markup: string;

  private constructor(markup: string) {
    this.#markup = markup;
  }

  static {
    make = (markup) => new Html(markup);
    isHtml = (value): value is Html => typeof value === 'object' && value !== null && #markup in value;
  }

  /** The markup as a string, for the response's body. */
  toString(): string {
    return this.#markup;
  }
}

/** What a template interpolates: markup as is; strings and numbers as text; nothing for null and false. */
export type HtmlValue = Html | string | number | bigint | false | null | undefined | Iterable<HtmlValue>;

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text as markup that shows it: the kit's own, never exported. */
function escapeText(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char]!);
}

/** Where a template's value lands. */
type Hole = 'text' | 'attribute' | 'shown-attribute' | 'url' | 'image-url' | 'between-attributes';

/** Attributes a person reads (a tooltip, a placeholder, what a screen reader says): shown as text is. */
const SHOWN_ATTRIBUTES = new Set([
  'title',
  'alt',
  'placeholder',
  'label',
  'aria-label',
  'aria-description',
  'aria-roledescription',
  'aria-valuetext',
  'aria-placeholder',
]);

/** Attributes whose value is a URL the browser follows or loads. */
const URL_ATTRIBUTES = new Set([
  'href',
  'src',
  'action',
  'formaction',
  'poster',
  'cite',
  'data',
  'xlink:href',
]);
/** Elements whose content is not HTML: a value there would be script or style, not text. */
const RAW_TEXT = new Set(['script', 'style']);

/** A template the kit refuses: a programming error, found the first time the template runs. */
export class HtmlTemplateError extends Error {
  override name = 'HtmlTemplateError';
}

const compiled = new WeakMap<TemplateStringsArray, Hole[]>();

/**
 * Reads a template's fixed strings as the browser would (enough of HTML's tokenizer for our templates) and
 * says where each value lands, or throws where no value may.
 */
function holesOf(strings: readonly string[]): Hole[] {
  type State =
    | 'text'
    | 'tag-name'
    | 'tag'
    | 'attribute-name'
    | 'after-attribute-name'
    | 'before-value'
    | 'double-quoted'
    | 'single-quoted'
    | 'unquoted'
    | 'raw-text'
    | 'comment';
  let state = 'text' as State;
  let tagName = '';
  let closing = false;
  let attribute = '';
  let valueStarted = false;
  let rawEnd = '';
  const holes: Hole[] = [];
  const refuse = (why: string, at: number): never => {
    const shown = strings
      .slice(0, at + 1)
      .join('${…}')
      .slice(-60);
    throw new HtmlTemplateError(`html: ${why}, after "${shown}"`);
  };
  const endTag = () => {
    state = !closing && RAW_TEXT.has(tagName) ? 'raw-text' : 'text';
    rawEnd = `</${tagName}`;
  };
  for (let s = 0; s < strings.length; s++) {
    const part = strings[s]!;
    for (let i = 0; i < part.length; i++) {
      const c = part[i]!;
      const space = c === ' ' || c === '\n' || c === '\t' || c === '\r' || c === '\f';
      switch (state) {
        case 'text':
          if (c !== '<') break;
          if (part.startsWith('<!--', i)) {
            state = 'comment';
            i += 3;
          } else if (/[a-zA-Z!]/.test(part[i + 1] ?? '')) {
            state = 'tag-name';
            tagName = '';
            closing = false;
          } else if (part[i + 1] === '/' && /[a-zA-Z]/.test(part[i + 2] ?? '')) {
            state = 'tag-name';
            tagName = '';
            closing = true;
            i += 1;
          }
          break;
        case 'tag-name':
          if (space || c === '/') state = 'tag';
          else if (c === '>') endTag();
          else tagName += c.toLowerCase();
          break;
        case 'tag':
          if (c === '>') endTag();
          else if (!space && c !== '/') {
            state = 'attribute-name';
            attribute = c.toLowerCase();
          }
          break;
        case 'attribute-name':
          if (space) state = 'after-attribute-name';
          else if (c === '=') state = 'before-value';
          else if (c === '>') endTag();
          else if (c === '/') state = 'tag';
          else attribute += c.toLowerCase();
          break;
        case 'after-attribute-name':
          if (c === '=') state = 'before-value';
          else if (c === '>') endTag();
          else if (!space && c !== '/') {
            state = 'attribute-name';
            attribute = c.toLowerCase();
          }
          break;
        case 'before-value':
          if (c === '"' || c === "'") {
            state = c === '"' ? 'double-quoted' : 'single-quoted';
            valueStarted = false;
          } else if (c === '>') endTag();
          else if (!space) state = 'unquoted';
          break;
        case 'double-quoted':
        case 'single-quoted':
          if (c === (state === 'double-quoted' ? '"' : "'")) state = 'tag';
          else valueStarted = true;
          break;
        case 'unquoted':
          if (space) state = 'tag';
          else if (c === '>') endTag();
          break;
        case 'raw-text':
          if (part.slice(i, i + rawEnd.length).toLowerCase() === rawEnd) {
            state = 'tag-name';
            closing = true;
            tagName = '';
            i += 1;
          }
          break;
        case 'comment':
          if (part.startsWith('-->', i)) {
            state = 'text';
            i += 2;
          }
          break;
      }
    }
    if (s === strings.length - 1) break;
    switch (state) {
      case 'text':
        if (/<\/?$/.test(strings[s]!)) refuse("no value in a tag's name", s);
        // A textarea's text is the value its form sends back, exact as a field's `value` is.
        holes.push(tagName === 'textarea' && !closing ? 'attribute' : 'text');
        break;
      case 'tag-name': // `<fieldset${DANGER}>`: after a whole name, as after an attribute
      case 'tag':
      case 'after-attribute-name':
        holes.push('between-attributes');
        break;
      case 'double-quoted':
      case 'single-quoted':
        if (attribute.startsWith('on')) refuse(`no value in the event handler attribute ${attribute}`, s);
        if (attribute === 'style' || attribute === 'srcdoc')
          refuse(`no value in the ${attribute} attribute`, s);
        if (SHOWN_ATTRIBUTES.has(attribute)) holes.push('shown-attribute');
        else if (!URL_ATTRIBUTES.has(attribute) || valueStarted) holes.push('attribute');
        else holes.push(tagName === 'img' && attribute === 'src' ? 'image-url' : 'url');
        valueStarted = true;
        break;
      case 'before-value':
      case 'unquoted':
        refuse(`a value in attribute ${attribute} must be inside quotes`, s);
        break;
      case 'raw-text':
        refuse(`no value inside <${tagName}> (use jsonScript for data)`, s);
        break;
      case 'comment':
        refuse('no value inside a comment', s);
        break;
      default:
        refuse("no value in a tag's or an attribute's name", s);
    }
  }
  return holes;
}

/**
 * Whether a URL may be followed from a page: a relative one (a path, a query, a fragment) or an absolute
 * http or https one. `javascript:`, `data:`, `vbscript:` and every other scheme are not.
 */
export function isSafeUrl(url: string): boolean {
  // Browsers drop these anywhere in a URL before they read its scheme (`java\tscript:` is `javascript:`).
  // eslint-disable-next-line no-control-regex
  const bare = url.replace(/[\u0000-\u0020\u007f]/g, '');
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(bare);
  return scheme === null || /^https?$/i.test(scheme[1]!);
}

/** `url` when it is safe to follow (`isSafeUrl`), else `#` (a link to nowhere rather than a page that fails). */
export function safeUrl(url: string): string {
  return isSafeUrl(url) ? url : '#';
}

/** An image as a `data:` URL: safe as an `<img>`'s source, which runs no script (not even an SVG's). */
const isImageData = (url: string) => /^data:image\//i.test(url.trimStart());

/**
 * A value as markup: markup as is, anything else as escaped text; `shown` (a page's text, an attribute a
 * person reads) also shows control, bidi and zero-width characters as their escapes (text/printable.ts).
 */
function textOf(value: unknown, shown: boolean): string {
  if (value === null || value === undefined || value === false) return '';
  if (typeof value === 'string') return escapeText(shown ? printable(value, true) : value);
  if (isHtml(value)) return value.toString();
  if (typeof value === 'object' && Symbol.iterator in value) {
    let joined = '';
    for (const item of value as Iterable<unknown>) joined += textOf(item, shown);
    return joined;
  }
  return escapeText(String(value));
}

/** Between a tag's attributes only markup fits: a string there could add any attribute (`onclick=…`). */
function betweenAttributes(value: unknown): string {
  if (value === null || value === undefined || value === false || value === '') return '';
  if (isHtml(value)) return value.toString();
  if (typeof value === 'object' && Symbol.iterator in value) {
    let joined = '';
    for (const item of value as Iterable<unknown>) joined += betweenAttributes(item);
    return joined;
  }
  throw new HtmlTemplateError(
    `html: a ${typeof value} between attributes; write the attribute in the template, its value in quotes`,
  );
}

/** Markup from a template: every value is text (escaped) unless it is already `Html`. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let holes = compiled.get(strings);
  if (!holes) {
    holes = holesOf(strings);
    compiled.set(strings, holes);
  }
  let markup = strings[0]!;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    const hole = holes[i]!;
    if (hole === 'between-attributes') markup += betweenAttributes(value);
    else if (
      (hole === 'url' || hole === 'image-url') &&
      typeof value === 'string' &&
      !isSafeUrl(value) &&
      !(hole === 'image-url' && isImageData(value))
    )
      throw new HtmlTemplateError(`html: refused the URL ${JSON.stringify(value.slice(0, 40))} (safeUrl)`);
    else markup += textOf(value, hole === 'text' || hole === 'shown-attribute');
    markup += strings[i + 1]!;
  }
  return make(markup);
}

/** Values one after the other (text escaped), with `separator` between them. */
export function join(values: Iterable<HtmlValue>, separator: HtmlValue = ''): Html {
  const between = textOf(separator, true);
  return make(Array.from(values, (value) => textOf(value, true)).join(between));
}

/** JSON for a page's script, in an element that does not run (`type="application/json"`). */
export function jsonScript(id: string, value: unknown): Html {
  // JSON that cannot close its element or open a comment, whatever its strings hold.
  const json = JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
  return make(`<script type="application/json" id="${escapeText(id)}">${json}</script>`);
}

/**
 * The escape hatch: `markup` taken as markup, unescaped. Only for fixed markup written in our source (an
 * inline SVG); every call is on the allow-list of scripts/check-html.js, which fails lint on any other.
 */
export function trustedHtml(markup: string): Html {
  return make(markup);
}
