import { readFileSync } from 'node:fs';
import t from 'tap';
import { chooseLocale, localeFromAcceptLanguage } from '../../src/html/locale.js';
import { CATALOGUES, format } from '../../src/widget/messages.js';
import { describeProblem } from '../../src/widget/problems.js';

t.test('both catalogues have exactly the same keys, and no empty string', async (t) => {
  const es = Object.keys(CATALOGUES.es).sort();
  const en = Object.keys(CATALOGUES.en).sort();
  t.same(es, en, 'the same keys');
  for (const [locale, catalogue] of Object.entries(CATALOGUES))
    for (const [key, text] of Object.entries(catalogue)) {
      t.ok(typeof text === 'string' && text.trim().length > 0, `${locale} ${key} is not empty`);
      const placeholders = (text.match(/\{\w+\}/g) ?? []).sort();
      const other = CATALOGUES[locale === 'es' ? 'en' : 'es'][key as keyof typeof catalogue];
      t.same(placeholders, (other.match(/\{\w+\}/g) ?? []).sort(), `${key}: the same placeholders`);
    }
});

t.test('every key the page script asks for is in the catalogue', async (t) => {
  const script = readFileSync(new URL('../../../src/widget/static/widget.js', import.meta.url), 'utf8');
  const asked = new Set([...script.matchAll(/\bt\(\s*'([\w.]+)'\s*[,)]/g)].map((match) => match[1]!));
  t.ok(asked.size > 40, 'the script words everything through t()');
  for (const key of asked) t.ok(key in CATALOGUES.es, `${key} is in the catalogue`);
});

t.test('Accept-Language and the choice of language', async (t) => {
  t.equal(localeFromAcceptLanguage('es-CL,es;q=0.9,en;q=0.8'), 'es');
  t.equal(localeFromAcceptLanguage('en-US,en;q=0.9'), 'en');
  t.equal(localeFromAcceptLanguage('fr-FR, en;q=0.5, es;q=0.7'), 'es', 'by q-value');
  t.equal(localeFromAcceptLanguage('es;q=0, en'), 'en', 'q=0 means not this one');
  t.equal(localeFromAcceptLanguage('de, *'), null);
  t.equal(localeFromAcceptLanguage(undefined), null);
  t.equal(chooseLocale('en', 'es-CL', 'es'), 'en', 'the token first');
  t.equal(chooseLocale(null, 'en-GB', 'es'), 'en', 'then the browser');
  t.equal(chooseLocale(null, 'pt-BR', 'en'), 'en', "then the operator's default");
  t.equal(format('{a} and {b}', { a: 1 }), '1 and {b}', 'an unknown name shows');
});

t.test('problems are worded in both languages, with the bank named', async (t) => {
  t.match(describeProblem('bank_unavailable', { bankName: 'Bci' }, 'es'), {
    title: 'Bci no responde',
    retry: true,
  });
  t.match(describeProblem('bank_unavailable', {}, 'en'), { title: 'Your bank is not responding' });
  t.match(describeProblem('connection_limit_reached', { connectionLimit: 1 }, 'es'), {
    message: /^Ya tienes 1 banco conectado/,
  });
  t.match(describeProblem('connection_limit_reached', { connectionLimit: 3 }, 'en'), {
    message: /^You already have 3 connected banks/,
  });
  t.match(describeProblem('token_expired', { tokenTtlMinutes: 10 }, 'es'), {
    message: /válidos por 10 minutos/,
  });
  t.match(describeProblem('no_such_code', {}, 'es'), { title: 'Algo salió mal', message: /no_such_code/ });
  t.match(describeProblem('action_required', { bankName: 'Itaú Chile' }, 'en'), {
    title: 'Itaú Chile needs your attention',
  });
});
