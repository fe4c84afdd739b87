import t from 'tap';
import {
  coverageOf,
  parseAuthorizationDetails,
  requestedDetails,
  validUntil,
} from '../../src/banks/consent/authorization-details.js';
import {
  consentScreen,
  monthsBetween,
  renderConsentScreen,
} from '../../src/widget/consent/consent-screen.js';
import { isGrant, type LoginCredentials } from '../../src/banks/connector.js';

/* The widget's consent screen: what the end user reads before going to the bank, in Spanish and English. */

const NOW = Date.UTC(2026, 5, 15, 15, 0, 0);
const context = { app: 'Préstamos Rápidos', bank: 'Banco Abierto (simulado)', now: NOW };

t.test('everything for 36 months, in both languages', async (t) => {
  const details = requestedDetails(NOW, 36, 'Evaluar tu crédito');
  t.same(coverageOf(details), ['accounts', 'balances', 'movements', 'credit_cards']);
  const es = consentScreen(details, 'es', context);
  t.equal(es.title, 'Vas a compartir con Préstamos Rápidos');
  t.same(
    es.items.map((i) => i.text),
    [
      'Tus cuentas: número, tipo y titular',
      'Los saldos de tus cuentas',
      'Tus movimientos: cargos y abonos',
      'Tus tarjetas de crédito: cupo, deuda y compras',
    ],
  );
  t.equal(es.duration, 'Durante 36 meses, hasta el 15 de junio de 2029');
  t.equal(es.button, 'Continuar a Banco Abierto (simulado)');
  t.ok(es.canContinue);
  const en = consentScreen(details, 'en', context);
  t.equal(en.duration, 'For 36 months, until 15 June 2029');
  t.equal(en.items[2]!.text, 'Your movements: debits and credits');
  t.equal(en.button, 'Continue to Banco Abierto (simulado)');
  t.equal(es.items.length, en.items.length);
});

t.test('only what the actions allow; one month; no end date', async (t) => {
  const details = [
    {
      type: 'Accounts',
      actions: ['ReadAccounts', 'ReadTransactions', 'DeleteEverything'],
      validTo: new Date(Date.UTC(2026, 6, 15, 15)).toISOString(),
    },
    { type: 'Payments', actions: ['ReadBalances'] },
  ];
  const screen = consentScreen(details, 'es', context);
  t.same(
    screen.items.map((i) => i.coverage),
    ['accounts', 'movements'],
    'unknown actions and other types add nothing',
  );
  t.equal(screen.duration, 'Durante 1 mes, hasta el 15 de julio de 2026');
  const open = consentScreen([{ type: 'Accounts', actions: ['ReadBalances'] }], 'en', context);
  t.equal(open.duration, 'Until you revoke it');
  t.equal(validUntil([{ type: 'Accounts' }]), null);
});

t.test(
  "the holder's name first, as each country asks for it; alone it is no reason to connect",
  async (t) => {
    const details = requestedDetails(NOW, 12, 'x');
    const chile = consentScreen(details, 'es', { ...context, holder: 'name' });
    t.same(
      chile.items.map((i) => i.coverage),
      ['name', 'accounts', 'balances', 'movements', 'credit_cards'],
    );
    t.equal(chile.items[0]!.text, 'Tu nombre, como lo tiene registrado el banco');
    const brasil = consentScreen(details, 'en', { ...context, holder: 'identification' });
    t.equal(
      brasil.items[0]!.text,
      'Your personal details at the bank',
      "Brazil's permission opens the whole record: the line says more than the name",
    );
    t.equal(
      consentScreen(details, 'en', { ...context, holder: null }).items.length,
      4,
      'not asked: not listed',
    );
    const nameOnly = consentScreen([{ type: 'Accounts', actions: [] }], 'en', { ...context, holder: 'name' });
    t.notOk(nameOnly.canContinue, 'a name and no account: no button');
  },
);

t.test('nothing to show, or already expired: no button', async (t) => {
  const none = consentScreen([{ type: 'Accounts', actions: [] }], 'en', context);
  t.notOk(none.canContinue);
  t.match(renderConsentScreen(none).toString(), /role="alert"/);
  t.notMatch(renderConsentScreen(none).toString(), /<button/);
  const past = consentScreen(
    [{ type: 'Accounts', actions: ['ReadAccounts'], validTo: '2020-01-01T00:00:00Z' }],
    'en',
    context,
  );
  t.notOk(past.canContinue);
});

t.test('markup escapes names', async (t) => {
  const screen = consentScreen(requestedDetails(NOW, 12, 'x'), 'en', {
    ...context,
    app: '<script>alert(1)</script>',
  });
  const markup = renderConsentScreen(screen).toString();
  t.notMatch(markup, /<script>/);
  t.match(markup, /&lt;script&gt;/);
  t.match(markup, /<li data-covers="credit_cards">/);
});

t.test('authorization_details from a bank are checked before use', async (t) => {
  t.same(parseAuthorizationDetails([{ type: 'Accounts', actions: ['ReadAccounts'] }]), [
    { type: 'Accounts', actions: ['ReadAccounts'] },
  ]);
  for (const bad of [
    null,
    'Accounts',
    {},
    [{}],
    [{ type: 'Accounts', actions: 'ReadAccounts' }],
    [{ type: 'Accounts', validTo: 'soon' }],
  ])
    t.equal(parseAuthorizationDetails(bad), null, JSON.stringify(bad));
  t.equal(monthsBetween(NOW, NOW), 0);
});

t.test('a login is a password or a grant', async (t) => {
  const password: LoginCredentials = { rut: '11111111-1', password: 'x', rutEmpresa: null };
  const grant: LoginCredentials = {
    kind: 'grant',
    grantId: 'g',
    accessToken: 'a',
    accessTokenExpiresAt: null,
    refreshToken: null,
    authorizationDetails: [],
  };
  t.notOk(isGrant(password));
  t.ok(isGrant(grant));
});

t.test("the simulated bank's consent page shows the widget's list and end date, word for word", async (t) => {
  const { consentPage } = await import('../../src/consent-bank/pages.js');
  const details = requestedDetails(NOW, 12, 'Evaluar tu crédito');
  for (const locale of ['es', 'en'] as const) {
    const widget = consentScreen(details, locale, { ...context, holder: 'name' });
    const page = String(
      consentPage(locale, {
        clientName: context.app,
        rut: '11.111.111-1',
        // The bank lists in its own order whatever order the request named the actions in.
        actions: ['ReadCreditCards', 'ReadTransactions', 'ReadBalances', 'ReadAccounts'],
        name: true,
        validTo: details[0]!.validTo!,
        approveAction: '/a',
        refuseAction: '/r',
      }),
    );
    const items = [...page.matchAll(/<li[^>]*>([^<]*)<\/li>/g)].map((m) => m[1]);
    t.same(
      items,
      widget.items.map((i) => i.text),
      `${locale}: the same five lines (the name first), in the same order`,
    );
    const date = locale === 'es' ? '15 de junio de 2027' : '15 June 2027';
    t.match(widget.duration, date);
    t.match(
      page,
      locale === 'es' ? `<p>Hasta el ${date}.</p>` : `<p>Until ${date}.</p>`,
      `${locale}: dated alike`,
    );
    t.match(page, locale === 'es' ? 'Préstamos Rápidos pide acceso' : 'Préstamos Rápidos asks to see');
  }
});
