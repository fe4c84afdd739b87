import t from 'tap';
import { bankName, money, shownName } from '../../src/console/format.js';
import { CONSOLE_CATALOGUES, codeWord } from '../../src/console/messages.js';
import { DEFAULT_ORGANISATION_NAME } from '../../src/orgs/default-names.js';

/** Intl separates a currency code from the number with a no-break space. */
const NBSP = '\u00a0';

t.test('money is shown as money in the reader’s locale, from minor units', async (t) => {
  t.equal(money(-138100, 'CLP', 'es'), '$-138.100', 'CLP has no minor unit (Chile writes the sign after $)');
  t.equal(money(-138100, 'CLP', 'en'), `-CLP${NBSP}138,100`);
  t.equal(money(1234, 'USD', 'es'), 'US$12,34', 'USD is in cents');
  t.equal(money(1234, 'USD', 'en'), '$12.34');
  t.equal(money(5, 'peso', 'es'), '5 peso', 'a code that is no currency code is shown as stored');
});

t.test('banks by name, and the names svc install chose in the reader’s language', async (t) => {
  t.equal(bankName('bancochile'), 'Banco de Chile');
  t.equal(bankName('nobank'), 'nobank');
  t.equal(shownName('es', DEFAULT_ORGANISATION_NAME), 'Organización principal');
  t.equal(shownName('en', DEFAULT_ORGANISATION_NAME), 'Default organisation');
  t.equal(shownName('es', 'Lender SpA'), 'Lender SpA', "a person's name is shown as written");
  t.equal(codeWord('es', 'account_type', 'savings'), 'Cuenta de ahorro');
  t.equal(codeWord('es', 'key_status', 'revoked'), 'revocada');
  t.equal(codeWord('es', 'account_type', 'brokerage'), 'brokerage', 'an unknown code is shown, not hidden');
});

/**
 * Messages that are the same word in both languages, and why. Any other Spanish message equal to its
 * English one is a string nobody translated.
 */
const SAME_IN_BOTH: Record<string, string> = {
  'links.external_user': 'the API field name',
  'col.error': 'Error is Spanish too',
  'col.endpoint': 'the word Chilean developers use',
  'webhooks.endpoint': 'the word Chilean developers use',
  'keys.id': 'ID',
  'keys.grace_hours': 'hours as h',
  'users.no': 'no is Spanish too',
  'nav.webhooks': 'the product word',
  'webhooks.title': 'the product word',
  'webhooks.url': 'URL',
  'webhooks.ms': 'milliseconds as ms',
  'webhooks.error': 'Error is Spanish too',
};

t.test('every Spanish message is translated, unless it is the same word in both', async (t) => {
  const { es, en } = CONSOLE_CATALOGUES;
  const untranslated = Object.keys(es).filter(
    (key) => es[key as keyof typeof es] === en[key as keyof typeof en] && !(key in SAME_IN_BOTH),
  );
  t.same(untranslated, [], 'no Spanish message is the English one');
  for (const key of Object.keys(SAME_IN_BOTH))
    t.ok(key in es, `${key} is still a message (the allow-list names no message that is gone)`);
});
