import { readFileSync } from 'node:fs';
import t from 'tap';

/** The example page docs/widget.md gives integrators: a page a phone shows at its own width. */
const DOC = readFileSync(new URL('../../../docs/widget.md', import.meta.url), 'utf8');

t.test("the widget example page's head", async (t) => {
  const pages = [...DOC.matchAll(/```html\n([\s\S]*?)```/g)].map((match) => match[1]!);
  t.equal(pages.length, 1, 'docs/widget.md has one example page');
  const head = /<head>([\s\S]*?)<\/head>/.exec(pages[0] ?? '')?.[1] ?? '';
  t.match(head, /<meta charset="utf-8" \/>/, 'declares its encoding');
  t.match(
    head,
    /<meta name="viewport" content="width=device-width, initial-scale=1" \/>/,
    'sets the viewport, so a phone does not show it as a shrunken desktop page',
  );
  t.match(head, /<script src="[^"]*\/widget\/embed\.js"><\/script>/, 'loads embed.js from the appliance');
});
