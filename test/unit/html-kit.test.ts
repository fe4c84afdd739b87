import t from 'tap';
import {
  html,
  HtmlTemplateError,
  isHtml,
  isSafeUrl,
  join,
  jsonScript,
  safeUrl,
  trustedHtml,
} from '../../src/html/html.js';

const text = (value: unknown) => String(value);

t.test('every special character of a value is escaped', async (t) => {
  t.equal(text(html`<p>${'&'}${'<'}${'>'}${'"'}${"'"}</p>`), '<p>&amp;&lt;&gt;&quot;&#39;</p>');
  t.equal(
    text(html`<p title="${'a" onmouseover="x'}">x</p>`),
    '<p title="a&quot; onmouseover=&quot;x">x</p>',
  );
  t.equal(text(html`<p title='${"a' b"}'>x</p>`), "<p title='a&#39; b'>x</p>");
});

t.test('markup nests as is; a plain string is always text', async (t) => {
  const inner = html`<b>${'<i>'}</b>`;
  t.equal(text(html`<p>${inner}</p>`), '<p><b>&lt;i&gt;</b></p>');
  t.equal(text(html`<p>${'<b>bold</b>'}</p>`), '<p>&lt;b&gt;bold&lt;/b&gt;</p>');
  // A look-alike of the markup type is not markup: it is text like any other value.
  const fake = { toString: () => '<script>alert(1)</script>' };
  t.notOk(isHtml(fake));
  t.notOk(isHtml('<b>x</b>'));
  t.ok(isHtml(inner));
  t.equal(text(html`<p>${fake as never}</p>`), '<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>');
});

t.test('arrays and iterables join; null, undefined and false render nothing; numbers are text', async (t) => {
  t.equal(text(html`<ul>${['a<', html`<li>b</li>`]}</ul>`), '<ul>a&lt;<li>b</li></ul>');
  t.equal(text(html`<ul>${new Set(['x', 'y'])}</ul>`), '<ul>xy</ul>');
  t.equal(text(html`<p>${null}${undefined}${false}</p>`), '<p></p>');
  t.equal(text(html`<p>${0}${12.5}${10n}</p>`), '<p>012.510</p>');
  t.equal(text(join(['a', html`<br>`, '<c>'], ', ')), 'a, <br>, &lt;c&gt;');
});

t.test('a value where it could only be unsafe is refused when the template runs', async (t) => {
  const value = 'x';
  t.throws(() => html`<a href=${value}>`, HtmlTemplateError, 'an unquoted attribute');
  t.throws(() => html`<a title=x${value}>`, HtmlTemplateError, 'inside an unquoted attribute');
  t.throws(() => html`<button onclick="${value}">`, HtmlTemplateError, 'an event handler');
  t.throws(() => html`<p style="${value}">`, HtmlTemplateError, 'a style attribute');
  t.throws(() => html`<script>var a = ${value};</script>`, HtmlTemplateError, 'a script');
  t.throws(() => html`<style>${value}</style>`, HtmlTemplateError, 'a style element');
  t.throws(() => html`<!-- ${value} -->`, HtmlTemplateError, 'a comment');
  t.throws(() => html`<${value}>`, HtmlTemplateError, "a tag's name");
  // After the script element closes, text is text again.
  t.equal(text(html`<script src="/a.js"></script><p>${'<'}</p>`), '<script src="/a.js"></script><p>&lt;</p>');
});

t.test('between attributes only markup fits', async (t) => {
  const on = html` selected`;
  t.equal(text(html`<option value="a"${on}>a</option>`), '<option value="a" selected>a</option>');
  t.equal(text(html`<option value="a"${false}>a</option>`), '<option value="a">a</option>');
  t.equal(text(html`<fieldset${on}></fieldset>`), '<fieldset selected></fieldset>');
  t.throws(() => html`<fieldset${' class="x"'}></fieldset>`, HtmlTemplateError);
  t.throws(() => html`<option value="a"${' onclick=alert(1)'}>a</option>`, HtmlTemplateError);
});

t.test('URLs: relative, http and https pass; javascript: and its disguises are refused', async (t) => {
  for (const url of ['/console/o/1', '?page=2', '#main', 'page', 'https://x.cl/a', 'HTTP://x', '//cdn.x/a'])
    t.ok(isSafeUrl(url), url);
  for (const url of [
    'javascript:alert(1)',
    ' JavaScript:x',
    'java\tscript:x',
    'data:text/html,x',
    'vbscript:x',
  ])
    t.notOk(isSafeUrl(url), url);
  t.equal(safeUrl('javascript:alert(1)'), '#');
  t.equal(safeUrl('/ok'), '/ok');
  t.throws(() => html`<a href="${'javascript:alert(1)'}">x</a>`, HtmlTemplateError);
  t.throws(() => html`<form action="${'javascript:x'}"></form>`, HtmlTemplateError);
  t.equal(text(html`<a href="${'/a?b=1&c=2'}">x</a>`), '<a href="/a?b=1&amp;c=2">x</a>');
  // Only the start of a URL decides its scheme: a value later in it is text.
  t.equal(text(html`<a href="/search?q=${'javascript:x'}">x</a>`), '<a href="/search?q=javascript:x">x</a>');
  // An image may be a data: URL (an <img> runs no script); a link may not.
  t.equal(text(html`<img src="${'data:image/png;base64,AA'}">`), '<img src="data:image/png;base64,AA">');
  t.throws(() => html`<a href="${'data:image/png;base64,AA'}">x</a>`, HtmlTemplateError);
});

t.test('jsonScript cannot be closed by what its strings hold; trustedHtml is taken as is', async (t) => {
  t.equal(
    text(jsonScript('boot', { a: '</script><!--&\u2028' })),
    '<script type="application/json" id="boot">{"a":"\\u003c/script\\u003e\\u003c!--\\u0026\\u2028"}</script>',
  );
  t.equal(text(html`<p>${trustedHtml('<svg></svg>')}</p>`), '<p><svg></svg></p>');
});

t.test(
  'control, bidi and zero-width characters of a text show as their escapes, as the CLI shows them',
  async (t) => {
    const hostile = 'cust\u202e1147-remotsuc\u200b\u2066x\u2069\u0007\u200e\ufeff';
    const shown = 'cust\\u202e1147-remotsuc\\u200b\\u2066x\\u2069\\u0007\\u200e\\ufeff';
    t.equal(text(html`<td>${hostile}</td>`), `<td>${shown}</td>`, 'in a page’s text');
    t.equal(
      text(html`<title>${hostile}</title>`),
      `<title>${shown}</title>`,
      'in the title (no markup there)',
    );
    t.equal(text(join([hostile, 'b'], '\u202e')), `${shown}\\u202eb`, 'in joined values and their separator');
    t.equal(text(html`<p><b>${hostile}</b></p>`), `<p><b>${shown}</b></p>`, 'in nested markup');
    t.equal(
      text(html`<p title="${hostile}">x</p>`),
      `<p title="${shown}">x</p>`,
      'in an attribute a person reads',
    );
    t.equal(text(html`<i aria-label="${hostile}"></i>`), `<i aria-label="${shown}"></i>`);
    t.equal(
      text(html`<input name="d" value="${hostile}">`),
      `<input name="d" value="${hostile}">`,
      'but a field keeps its exact value, so a form sent back unchanged rewrites nothing',
    );
    t.equal(
      text(html`<textarea>${hostile}</textarea>`),
      `<textarea>${hostile}</textarea>`,
      'and so does a textarea',
    );
    t.equal(
      text(html`<pre>${'{\n\t\u2028a: 1\n}'}</pre>`),
      '<pre>{\n\t\\u2028a: 1\n}</pre>',
      'newlines and tabs are layout; a line separator shows',
    );
    t.equal(
      text(html`<p>${'👩\u200d💻 dev'}</p>`),
      '<p>👩\u200d💻 dev</p>',
      'an emoji sequence keeps its joiner',
    );
    t.equal(text(html`<p>${'pay\u200dpal'}</p>`), '<p>pay\\u200dpal</p>', 'a joiner between letters shows');
    t.equal(
      text(
        html`<p>${'hi\u{E0041}\u{E0042} \u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}'}</p>`,
      ),
      '<p>hi\\u{e0041}\\u{e0042} \u{1F3F4}\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}</p>',
      'hidden tag characters show; a flag’s tags are kept',
    );
  },
);
