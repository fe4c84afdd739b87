import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { checkTree } from '../helpers/tree-check.js';

const SCRIPT = fileURLToPath(new URL('../../../scripts/check-html.js', import.meta.url));
const check = (t: Test, files: Record<string, string>) => checkTree(t, SCRIPT, files);

t.test('markup written with the kit passes, and so does prose with angle brackets', async (t) => {
  const { status, stderr } = check(t, {
    'src/console/page.ts': [
      "import { html } from '../html/html.js';",
      'export const page = (name: string) => html`<p class="x">${name}</p>`;',
      '// a comment may say <p> and `<a href>`',
      "const hint = 'Send it as `Authorization: Bearer <key>` to <home>/svc.db';",
      'const re = /<p>/;',
      // A Markdown file's marker is one fixed comment: no markup is built.
      "export const START = '<!-- config-table:start -->';",
    ].join('\n'),
    'src/widget/page.ts':
      "const ICON = trustedHtml('<svg></svg>');\nconst LOCK = trustedHtml('<svg></svg>');\n",
    // The kit itself is not checked.
    'src/html/html.ts': 'function escapeText(s) { return s; }\nconst x = `<script>${1}</script>`;\n',
  });
  t.equal(status, 0, stderr);
});

t.test('a planted violation fails, naming file and line', async (t) => {
  const { status, stderr } = check(t, {
    'src/console/bad.ts': [
      "import { escapeHtml } from '../widget/page.js';",
      'const row = (name: string) => `<td>${escapeHtml(name)}</td>`;',
      'const empty = \'<p class="empty">none</p>\';',
      'const closing = "</div>";',
      "const comment = '<!-- x --><p>';",
    ].join('\n'),
    'src/links/other.ts':
      "import { html, trustedHtml } from '../html/html.js';\nexport const x = trustedHtml(input);\n",
    'src/widget/page.ts':
      "const A = trustedHtml('<svg/>');\nconst B = trustedHtml('<svg/>');\nconst C = trustedHtml('<svg/>');\n",
  });
  t.equal(status, 1);
  t.match(stderr, /src\/console\/bad\.ts:1: imports escapeHtml/);
  t.match(stderr, /src\/console\/bad\.ts:2: markup in a template literal/);
  t.match(stderr, /src\/console\/bad\.ts:3: markup in a string/);
  t.match(stderr, /src\/console\/bad\.ts:4: markup in a string/);
  t.match(stderr, /src\/console\/bad\.ts:5: markup in a string/, 'a comment with markup after it is markup');
  t.match(stderr, /src\/links\/other\.ts:2: trustedHtml\(\) outside its allow-list/);
  t.match(stderr, /src\/widget\/page\.ts:3: trustedHtml\(\) outside its allow-list/);
  t.notMatch(stderr, /src\/widget\/page\.ts:[12]:/, 'the two allowed calls pass');
});
