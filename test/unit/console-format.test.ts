import t from 'tap';
import { bankName, money, productKind, shownName } from '../../src/console/format.js';
import { atMinute, atSecond, readingAs, timeText } from '../../src/console/views.js';
import { CONSOLE_CATALOGUES, codeWord } from '../../src/console/messages.js';
import { DEFAULT_ORGANISATION_NAME } from '../../src/orgs/default-names.js';

/** Intl separates a currency code from the number with a no-break space. */
const NBSP = '\u00a0';

t.test('money is shown as money in the reader’s locale, from minor units', async (t) => {
  t.equal(money(-138100, 'CLP', 'es'), '-$138.100', 'CLP has no minor unit; Chile writes the sign before $');
  t.equal(money(-103560, 'CLP', 'es'), '-$103.560');
  t.equal(money(103560, 'CLP', 'es'), '$103.560');
  t.equal(money(-138100, 'CLP', 'en'), `-CLP${NBSP}138,100`);
  t.equal(money(1234, 'USD', 'es'), 'US$12,34', 'USD is in cents');
  t.equal(money(-1234, 'USD', 'es'), '-US$12,34', 'the sign before the dollar too');
  t.equal(money(1234, 'USD', 'en'), '$12.34');
  t.equal(money(-1234, 'USD', 'en'), '-$12.34');
  t.equal(money(-1234, 'BRL', 'es'), '-R$12,34', 'the real by its sign, not `BRL-12,34`');
  t.equal(money(-1234, 'BRL', 'en'), '-R$12.34');
  t.equal(money(5, 'peso', 'es'), '5 peso', 'a code that is no currency code is shown as stored');
});

t.test('times in the operator’s zone, in the reader’s format', async (t) => {
  const santiago = { locale: 'es' as const, zone: 'America/Santiago' };
  // 10:00 UTC is 07:00 in Santiago in November (summer time, UTC-3).
  t.equal(timeText('2026-11-29T10:00:07.000Z', santiago), '29-11-2026 07:00', 'not `2026-11-29 10:00 UTC`');
  t.equal(timeText('2026-11-29T10:00:07.000Z', santiago, true), '29-11-2026 07:00:07');
  t.equal(timeText('2026-06-15T15:00:00.000Z', santiago), '15-06-2026 11:00', 'winter: UTC-4');
  t.equal(
    timeText('2026-11-29T10:00:00.000Z', { locale: 'en', zone: 'America/Santiago' }),
    'Nov 29, 2026, 7:00 AM',
  );
  t.equal(timeText('2026-11-29T10:00:00.000Z', { locale: 'en', zone: 'UTC' }), 'Nov 29, 2026, 10:00 AM');
  t.equal(timeText(null, santiago), '');
  t.equal(timeText('not a time', santiago), '');
  t.equal(atMinute('2026-11-29T10:00:00.000Z'), '29-11-2026 07:00', 'outside a request: Spanish, Santiago');
  const inRequest = await readingAs({ locale: 'en', zone: 'Europe/London' }, async () => {
    await new Promise((resolve) => setImmediate(resolve));
    return atSecond('2026-11-29T10:00:07.000Z');
  });
  t.equal(inRequest, 'Nov 29, 2026, 10:00:07 AM', "a request's reader holds across its awaits");
});

t.test('an account is the product the bank named, not the API enum', async (t) => {
  t.equal(
    productKind('Cuenta Vista', 'Cuenta corriente'),
    'Cuenta vista',
    'a cuenta vista is not a cuenta corriente',
  );
  t.equal(productKind('Cuenta vista', 'Cuenta corriente'), 'Cuenta vista', 'as the consent mapping names it');
  t.equal(productKind('Cuenta Vista 2', 'Checking account'), 'Cuenta vista');
  t.equal(productKind('CUENTA RUT', 'Cuenta corriente'), 'Cuenta RUT');
  t.equal(productKind('Cuenta Corriente en Dólares', 'Cuenta corriente'), 'Cuenta corriente en dólares');
  t.equal(productKind('Cuenta de Ahorro Vivienda', 'Cuenta de ahorro'), 'Cuenta de ahorro vivienda');
  t.equal(productKind('Linea de Credito', 'Cuenta corriente'), 'Línea de crédito', 'accents or not');
  t.equal(
    productKind('Visa Signature', 'Tarjeta de crédito'),
    'Tarjeta de crédito',
    'no product named: the type',
  );
  t.equal(productKind('Cuenta Vistazo', 'Cuenta corriente'), 'Cuenta corriente', 'whole words only');
  t.equal(productKind(null, 'Cuenta corriente'), 'Cuenta corriente');
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
