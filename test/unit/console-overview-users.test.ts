import { readFileSync } from 'node:fs';
import t from 'tap';
import { CONSOLE_CATALOGUES } from '../../src/console/messages.js';
import { figuresHtml, healthSummary } from '../../src/console/pages/overview-page.js';
import { inviteProblem } from '../../src/console/pages/users-pages.js';

t.test("the console's catalogues have the same keys and placeholders, and no empty string", async (t) => {
  const { es, en } = CONSOLE_CATALOGUES;
  t.same(Object.keys(es).sort(), Object.keys(en).sort(), 'the same keys');
  for (const [locale, catalogue] of Object.entries(CONSOLE_CATALOGUES))
    for (const [key, text] of Object.entries(catalogue)) {
      t.ok(text.trim().length > 0, `${locale} ${key} is not empty`);
      const other = CONSOLE_CATALOGUES[locale === 'es' ? 'en' : 'es'][key as keyof typeof es];
      t.same(
        (text.match(/\{\w+\}/g) ?? []).sort(),
        (other.match(/\{\w+\}/g) ?? []).sort(),
        `${key}: the same placeholders`,
      );
    }
});

t.test('every key the overview and users pages ask for is in the catalogue', async (t) => {
  for (const file of ['overview-page.ts', 'users-pages.ts']) {
    const source = readFileSync(new URL(`../../../src/console/pages/${file}`, import.meta.url), 'utf8');
    const asked = [...source.matchAll(/'((?:overview|users|nav|keys|error|signin|links)\.[\w.]+)'/g)].map(
      (match) => match[1]!,
    );
    t.ok(asked.length > 10, `${file} words its page through the catalogue`);
    for (const key of asked) t.ok(key in CONSOLE_CATALOGUES.en, `${file}: ${key}`);
  }
});

t.test('figures: the number, linked where a list exists, escaped', async (t) => {
  t.equal(
    String(
      figuresHtml([
        {
          label: 'Active <links>',
          value: 3,
          href: '/console/o/org_1/test/links?status=active&x=1',
          note: '(1 paused)',
        },
        { label: 'Failing', value: 0 },
      ]),
    ),
    '<dl class="facts figures"><dt>Active &lt;links&gt;</dt><dd><a href="/console/o/org_1/test/links?status=active&amp;x=1">3</a> (1 paused)</dd><dt>Failing</dt><dd><span>0</span></dd></dl>',
  );
});

t.test('bank health: a bank with no recent outcome is up; the troubled ones by name', async (t) => {
  const banks = [
    { id: 'b', name: 'Bci' },
    { id: 'a', name: 'BancoEstado' },
    { id: 'c', name: 'Banco de Chile' },
  ];
  const summary = healthSummary(
    banks,
    new Map([
      ['b', 'down'],
      ['a', 'degraded'],
      ['z', 'down'],
    ] as const),
  );
  t.same(summary.counts, { up: 1, degraded: 1, down: 1 }, 'a bank not offered here is not counted');
  t.same(summary.troubled, [
    { name: 'BancoEstado', health: 'degraded' },
    { name: 'Bci', health: 'down' },
  ]);
});

t.test('an invitation is checked before anything is written', async (t) => {
  const org = 'org_0123456789abcdef';
  t.equal(inviteProblem({ email: 'ana@lender.cl', role: 'admin', org }), null);
  t.equal(inviteProblem({ email: 'ops@example.com', role: 'operator', org: '' }), null);
  t.equal(inviteProblem({ email: 'help@example.com', role: 'support', org: '' }), null, 'support for all');
  t.equal(inviteProblem({ email: 'ana', role: 'admin', org }), 'users.bad_email');
  t.equal(
    inviteProblem({ email: `${'a'.repeat(60)}@${'b'.repeat(190)}.cl`, role: 'admin', org }),
    'users.bad_email',
  );
  t.equal(inviteProblem({ email: ' ', role: 'admin', org }), 'users.bad_email');
  t.equal(inviteProblem({ email: 'ana@lender.cl', role: 'owner', org }), 'users.bad_role');
  t.equal(inviteProblem({ email: 'ana@lender.cl', role: 'operator', org }), 'users.operator_org');
  t.equal(inviteProblem({ email: 'ana@lender.cl', role: 'admin', org: '' }), 'users.admin_org');
  t.equal(inviteProblem({ email: 'ana@lender.cl', role: 'admin', org: 'org_x; drop' }), 'users.no_org');
});
