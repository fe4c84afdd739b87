#!/usr/bin/env node
// Markup is written one way: with the kit's `html` tagged template (src/html/html.ts), which escapes every
// value that is not already markup. This fails, naming file:line, on HTML built any other way in src/:
//   - a string or template literal holding a tag (`<a`, `</p`, `<!doctype`) that is not the body of an
//     `html` template (concatenated markup, where escaping rests on each line remembering);
//   - an import of an escape function (`escapeHtml`, `escape…Html`) from outside the kit;
//   - a call of the kit's escape hatch `trustedHtml(` in a file that is not on ALLOWED_TRUSTED below.
// src/html/ itself is the kit and is not checked. Code is read with the TypeScript parser, so comments and
// regular expressions never count.
//
// Usage: node scripts/check-html.js [ROOT] (default: the checkout this script is in).
import { readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath, URL } from 'node:url';
import ts from 'typescript';
import { sourceFiles } from './check-table-owners.js';

/** Files that may call trustedHtml(), and how many times: fixed markup of ours (inline SVG icons). */
export const ALLOWED_TRUSTED = { 'src/widget/page.ts': 2 };
const KIT = 'src/html/';
/**
 * A tag: a closing tag, a comment or doctype, or an opening tag of an HTML element (so prose like
 * `Bearer <key>` or `<home>/svc.db` is not markup).
 */
const ELEMENTS =
  'a|abbr|article|aside|b|body|br|button|caption|code|col|dd|details|div|dl|dt|em|fieldset|footer|form|h[1-6]|head|header|hr|html|i|iframe|img|input|label|legend|li|link|main|meta|nav|noscript|ol|option|p|pre|script|section|select|small|span|strong|style|summary|svg|table|tbody|td|textarea|tfoot|th|thead|title|tr|ul';
const TAG = new RegExp(`<\\/[a-zA-Z]|<!(?:--|doctype)|<(?:${ELEMENTS})[\\s/>]`, 'i');
const ESCAPE_IMPORT = /^escape\w*html$|^escapeHtml$/i;
/** A fixed string that is one HTML comment and nothing else (a Markdown file's marker) builds no markup. */
const ONLY_A_COMMENT = /^<!--[^<>]*-->$/;

/** The problems of one source file, as `file:line: what` strings. */
export function checkSource(path, text) {
  const problems = [];
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const line = (node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const isHtmlTag = (node) =>
    ts.isTaggedTemplateExpression(node.parent) && node.parent.tag.getText(source) === 'html';
  let trusted = 0;
  const visit = (node) => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      const trustedArgument =
        ts.isCallExpression(node.parent) && node.parent.expression.getText(source) === 'trustedHtml';
      if (
        TAG.test(node.text) &&
        !ONLY_A_COMMENT.test(node.text) &&
        !isHtmlTag(node) &&
        !trustedArgument &&
        !ts.isImportDeclaration(node.parent)
      )
        problems.push(`${path}:${line(node)}: markup in a string; write it in an html\`…\` template`);
    } else if (ts.isTemplateExpression(node)) {
      const parts = [node.head.text, ...node.templateSpans.map((span) => span.literal.text)];
      if (parts.some((part) => TAG.test(part)) && !isHtmlTag(node))
        problems.push(`${path}:${line(node)}: markup in a template literal; tag it html\`…\``);
    } else if (ts.isImportDeclaration(node) && node.importClause?.namedBindings) {
      const bindings = node.importClause.namedBindings;
      const names = ts.isNamedImports(bindings)
        ? bindings.elements.map((element) => element.getText(source))
        : [];
      for (const name of names)
        if (ESCAPE_IMPORT.test(name.split(/\s+as\s+/)[0]))
          problems.push(`${path}:${line(node)}: imports ${name}; interpolate into html\`…\` instead`);
    } else if (ts.isCallExpression(node) && node.expression.getText(source) === 'trustedHtml') {
      trusted += 1;
      if (trusted > (ALLOWED_TRUSTED[path] ?? 0))
        problems.push(
          `${path}:${line(node)}: trustedHtml() outside its allow-list (scripts/check-html.js ALLOWED_TRUSTED)`,
        );
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return problems;
}

export function checkTree(root) {
  const problems = [];
  for (const file of sourceFiles(join(root, 'src'))) {
    const path = relative(root, file).split(sep).join('/');
    if (path.startsWith(KIT) || !/\.m?tsx?$/.test(path)) continue;
    problems.push(...checkSource(path, readFileSync(file, 'utf8')));
  }
  return problems;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url));
  const problems = checkTree(root);
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(
      `check-html: ${problems.length} place(s) build HTML outside the kit (src/html/html.ts, docs/architecture.md)`,
    );
    process.exit(1);
  }
}
