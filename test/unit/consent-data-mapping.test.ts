import t from 'tap';
import type { Test } from 'tap';
import { ConnectorError } from '../../src/banks/connector.js';
import {
  createAnswerChecker,
  loadSpecSchemas,
  type AnswerKind,
} from '../../src/banks/consent/data-schemas.js';
import {
  chileanDate,
  mapAll,
  mapCardAccount,
  mapCardTransaction,
  mapDepositAccount,
  mapDepositTransaction,
  toMinorUnits,
  type ObAccount,
  type ObBalances,
  type ObCardAccount,
  type ObCardIdentification,
  type ObCardLimit,
  type ObCardTransaction,
  type ObTransaction,
  holderNameOf,
  identificationName,
} from '../../src/banks/consent/data-mapping.js';

/*
 * The consent connector's data side, without a bank: answers built from the official files' own
 * `example` values (each property's), adapted to CLP and RUT as docs/open-finance.md says, then checked
 * and mapped; and hostile answers that must fail with `invalid_bank_data` and a reason, never a crash.
 */

type Schema = Record<string, unknown>;
type Json = unknown;

/** An instance of `schema` from the examples the file gives for its properties (every property, optional too). */
function exampleOf(schema: Schema, schemas: Record<string, Schema>): Json {
  if (typeof schema.$ref === 'string') return exampleOf(schemas[schema.$ref.split('/').pop()!]!, schemas);
  if ('example' in schema && schema.type !== 'object' && schema.type !== 'array') return schema.example;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (schema.type === 'array') return [exampleOf(schema.items as Schema, schemas)];
  if (schema.type === 'object' || schema.properties) {
    const out: Record<string, Json> = {};
    for (const [key, inner] of Object.entries((schema.properties ?? {}) as Record<string, Schema>))
      out[key] = exampleOf(inner, schemas);
    return out;
  }
  if (schema.type === 'boolean') return false;
  if (schema.type === 'integer' || schema.type === 'number') return 1;
  if (schema.type === 'string' && schema.format === 'date-time') return '2021-05-21T08:30:00Z';
  return 'x';
}

/** Brazil to Chile: CLP amounts (no decimals), RUTs for CNPJ/CPF. What the simulated bank serves. */
function toChile(value: Json, key = ''): Json {
  if (Array.isArray(value)) return value.map((v) => toChile(v));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toChile(v, k)]));
  if (key === 'currency') return 'CLP';
  if (key === 'amount' && typeof value === 'string') return value.replace(/\.\d+$/, '.00');
  if (key === 'companyCnpj') return '97004000-5';
  if (key === 'partieCnpjCpf') return '11111111-1';
  return value;
}

const accounts = loadSpecSchemas('accounts');
const cards = loadSpecSchemas('credit-cards');
/** The same files as Brazil reads them: CNPJ/CPF, BRL (the `fapi1-br` profile's checker). */
const accountsBr = loadSpecSchemas('accounts', 'BR');
const cardsBr = loadSpecSchemas('credit-cards', 'BR');
const checkerBr = createAnswerChecker('BR');
const example = (schemas: Record<string, Schema>, name: string) => exampleOf({ $ref: `#/${name}` }, schemas);
const checker = createAnswerChecker();
const HOLDER = 'María José Pérez';
/** Whether a transaction of each completedAuthorisedPaymentType is pending: only an effected one is final. */
const PENDING_BY_STATUS = [
  ['TRANSACAO_EFETIVADA', false],
  ['LANCAMENTO_FUTURO', true],
  ['TRANSACAO_PROCESSANDO', true],
] as const;
/** A file's own example answer `name`, adapted to Chile, checked against `kind`'s schema as the bank's would be. */
const chileanExample = <T>(kind: AnswerKind, schemas: Record<string, Schema>, name: string) =>
  checker.check<T>(kind, toChile(example(schemas, name)));

const invalid = (t: Test, fn: () => unknown, reason: RegExp, what: string) => {
  try {
    fn();
    t.fail(`${what}: accepted`);
  } catch (error) {
    t.type(error, ConnectorError, what);
    t.equal((error as ConnectorError).code, 'invalid_bank_data', what);
    t.match((error as Error).message, reason, what);
  }
};

t.test('the files’ own examples, adapted to CLP and RUT, pass their schemas and map', async (t) => {
  const list = chileanExample<{ data: ObAccount[] }>('accounts', accounts, 'ResponseAccountList');
  const balances = chileanExample<{ data: ObBalances }>('balances', accounts, 'ResponseAccountBalances');
  const account = mapDepositAccount(list.data[0]!, balances.data, HOLDER);
  t.same(account, {
    ref: 'acc-92792126019929279212650822221989319252576',
    name: 'Cuenta corriente 8392',
    type: 'checking',
    currency: 'CLP',
    last4: '8392',
    holderName: HOLDER,
    balance: { available: 1000, current: 2000, limit: null },
  });

  const transactions = chileanExample<{ data: ObTransaction[] }>(
    'transactions',
    accounts,
    'ResponseAccountTransactions',
  );
  const [movement] = mapAll(transactions.data, (row) => mapDepositTransaction(row, 'CLP'));
  t.same(movement, {
    ref: 'TXpRMU9UQTROMWhZV2xSU1FUazJSMDl',
    amount: -1000,
    currency: 'CLP',
    description: 'Transferencia Enviada Lima Santos',
    type: 'transfer',
    referenceId: null,
    counterparty: { name: '', rut: '11111111-1', bankId: null, accountLast4: '4360' },
    postedAt: Date.parse('2016-01-29T12:29:03.374Z'),
    transactionDate: '2016-01-29',
    pending: false,
  });

  const cardList = chileanExample<{ data: ObCardAccount[] }>(
    'creditCardAccounts',
    cards,
    'ResponseCreditCardAccountsList',
  );
  const identification = chileanExample<{ data: ObCardIdentification }>(
    'creditCardIdentification',
    cards,
    'ResponseCreditCardAccountsIdentification',
  );
  const limits = chileanExample<{ data: ObCardLimit[] }>(
    'creditCardLimits',
    cards,
    'ResponseCreditCardAccountsLimits',
  );
  const card = mapCardAccount(cardList.data[0]!, identification.data, limits.data, HOLDER);
  t.match(card, { type: 'credit_card', currency: 'CLP', holderName: HOLDER });
  t.match(card.ref, /^card-/);
  t.match(card.last4, /^\d{4}$/);
  const cardTransactions = chileanExample<{ data: ObCardTransaction[] }>(
    'creditCardTransactions',
    cards,
    'ResponseCreditCardAccountsTransactions',
  );
  const [charge] = mapAll(cardTransactions.data, (row) => mapCardTransaction(row, 'CLP'));
  t.equal(charge!.ref, cardTransactions.data[0]!.transactionId, 'the bank’s transaction id is the ref');
  t.equal(charge!.pending, false, 'on a bill: booked');
});

t.test('the Brazilian examples as published fail the Chilean overlay, naming the field', async (t) => {
  invalid(
    t,
    () => checker.check('accounts', example(accounts, 'ResponseAccountList')),
    /companyCnpj/,
    'a CNPJ',
  );
  invalid(
    t,
    () => checker.check('transactions', example(accounts, 'ResponseAccountTransactions')),
    /partieCnpjCpf/,
    'a CPF',
  );
});

t.test('amounts: exact minor units; CLP has none', async (t) => {
  t.equal(toMinorUnits({ amount: '1500.00', currency: 'CLP' }, 'a'), 1500);
  t.equal(toMinorUnits({ amount: '1500.0000', currency: 'CLP' }, 'a'), 1500);
  t.equal(toMinorUnits({ amount: '-0.00', currency: 'CLP' }, 'a'), 0);
  t.equal(toMinorUnits({ amount: '1000.0400', currency: 'BRL' }, 'a'), 100004);
  t.equal(toMinorUnits({ amount: '0.10', currency: 'USD' }, 'a'), 10, 'no floating point: 0.1 is 10 cents');
  t.equal(toMinorUnits({ amount: '999999999999999.00', currency: 'CLP' }, 'a'), 999999999999999);
  invalid(
    t,
    () => toMinorUnits({ amount: '1500.50', currency: 'CLP' }, 'x'),
    /more decimals than CLP/,
    '1500.50 CLP',
  );
  invalid(
    t,
    () => toMinorUnits({ amount: '999999999999999.99', currency: 'USD' }, 'x'),
    /too large/,
    'past 2^53',
  );
  invalid(t, () => toMinorUnits({ amount: '1e3', currency: 'CLP' }, 'x'), /decimal/, 'exponent');
  invalid(t, () => toMinorUnits({ amount: '10', currency: 'pesos' }, 'x'), /currency/, 'not a currency');
});

t.test(
  'amounts past the minor unit (AccountTransactionsDataAmount, up to 4 decimals): BRL rounds, CLP refuses',
  async (t) => {
    const brl = (amount: string) => toMinorUnits({ amount, currency: 'BRL' }, 'transactionAmount');
    t.equal(brl('15.0049'), 1500, 'below half a centavo: down');
    t.equal(brl('15.0051'), 1501, 'above half a centavo: up');
    t.equal(brl('15.0050'), 1500, 'half a centavo, even centavo kept (ABNT NBR 5891, 2.4)');
    t.equal(brl('15.0150'), 1502, 'half a centavo, odd centavo raised (NBR 5891, 2.3)');
    t.equal(brl('15.005'), 1500, 'three decimals, half: to even');
    t.equal(brl('15.015'), 1502, 'three decimals, half: to even');
    t.equal(brl('15.9999'), 1600, 'carries into the real');
    t.equal(brl('0.0049'), 0);
    t.equal(
      toMinorUnits({ amount: '-10.0050', currency: 'BRL' }, 'a'),
      -1000,
      'a negative balance: the magnitude rounds',
    );
    t.equal(toMinorUnits({ amount: '-10.0150', currency: 'BRL' }, 'a'), -1002);
    t.equal(toMinorUnits({ amount: '-0.0040', currency: 'BRL' }, 'a'), 0, 'no negative zero');
    t.equal(
      toMinorUnits({ amount: '1.005', currency: 'USD' }, 'a'),
      100,
      'every currency with a minor unit: the same rule',
    );
    invalid(
      t,
      () => toMinorUnits({ amount: '1500.0050', currency: 'CLP' }, 'x'),
      /more decimals than CLP/,
      'CLP has no minor unit: a decimal is refused, never rounded',
    );
    const answer = example(accountsBr, 'ResponseAccountTransactions') as { data: ObTransaction[] };
    answer.data[0]!.transactionAmount = { amount: '1234.5678', currency: 'BRL' };
    const [row] = checkerBr.check<{ data: ObTransaction[] }>('transactions', answer).data;
    t.equal(
      mapDepositTransaction(row!, 'BRL', 'America/Sao_Paulo').amount,
      -123457,
      'a 4-decimal BRL debit maps, checked against the file as Brazil reads it',
    );
  },
);

t.test(
  'card limit and balance (credit cards 2.3.1 CreditCardAccountsLimitsData) as the file defines them',
  async (t) => {
    const answer = example(cardsBr, 'ResponseCreditCardAccountsLimits') as { data: ObCardLimit[] };
    const [card] = (example(cardsBr, 'ResponseCreditCardAccountsList') as { data: ObCardAccount[] }).data;
    const identification = (
      example(cardsBr, 'ResponseCreditCardAccountsIdentification') as { data: ObCardIdentification }
    ).data;
    const brl = (amount: string) => ({ amount, currency: 'BRL' });
    const line = (patch: Partial<ObCardLimit>, drop: (keyof ObCardLimit)[] = []): ObCardLimit => {
      const out: Partial<ObCardLimit> = { ...answer.data[0]!, ...patch };
      for (const key of drop) delete out[key];
      return out as ObCardLimit;
    };
    /** The lines, checked against the file as Brazil reads it, then mapped. */
    const balance = (data: ObCardLimit[], currency?: string) =>
      mapCardAccount(
        card!,
        identification,
        checkerBr.check<{ data: ObCardLimit[] }>('creditCardLimits', { ...answer, data }).data,
        HOLDER,
        currency,
      ).balance;
    const fixed = (identificationNumber: string, limit: string, used: string, available: string) =>
      line({
        creditLineLimitType: 'LIMITE_CREDITO_TOTAL',
        consolidationType: 'INDIVIDUAL',
        identificationNumber,
        isLimitFlexible: false,
        limitAmount: brl(limit),
        usedAmount: brl(used),
        availableAmount: brl(available),
      });
    const withdrawals = line({
      creditLineLimitType: 'LIMITE_CREDITO_MODALIDADE_OPERACAO',
      lineName: 'SAQUE_CREDITO_BRASIL',
      isLimitFlexible: false,
      limitAmount: brl('500.00'),
      usedAmount: brl('0.00'),
      availableAmount: brl('500.00'),
    });

    t.same(
      balance([withdrawals, fixed('4453', '5000.00', '1200.00', '3800.00')]),
      { available: 380000, current: 120000, limit: 500000 },
      'LIMITE_CREDITO_TOTAL is the card’s line, wherever it is listed',
    );
    t.same(
      balance([withdrawals]),
      { available: null, current: null, limit: null },
      'a modality line (lineName) is a sub-limit, never the card’s limit: no total line, no figures',
    );
    t.same(
      balance([
        line({ isLimitFlexible: true, usedAmount: brl('1200.00') }, ['limitAmount', 'availableAmount']),
      ]),
      { available: null, current: 120000, limit: null },
      'isLimitFlexible: "sem limite", so no limit, and no available amount the bank did not give (not 0)',
    );
    t.same(
      balance([
        line({
          isLimitFlexible: true,
          limitAmount: brl('5000.00'),
          usedAmount: brl('1200.00'),
          availableAmount: brl('9000.00'),
        }),
      ]),
      { available: 900000, current: 120000, limit: null },
      'a flexible limit has no fixed limit even with a limitAmount; its availableAmount is as stated',
    );
    t.same(
      balance([
        fixed('1111', '5000.00', '1200.00', '3800.00'),
        fixed('2222', '2000.00', '500.00', '1500.00'),
      ]),
      { available: 530000, current: 170000, limit: 700000 },
      'INDIVIDUAL: each card its own total line; the account is their sum',
    );
    const shared = (identificationNumber: string): ObCardLimit => ({
      ...fixed(identificationNumber, '5000.00', '1200.00', '3800.00'),
      consolidationType: 'CONSOLIDADO',
    });
    t.same(
      balance([shared('1111'), shared('2222')]),
      { available: 380000, current: 120000, limit: 500000 },
      'CONSOLIDADO: one limit shared by every card, counted once',
    );
    t.same(
      balance([fixed('1111', '5000.00', '-35.50', '5035.50')]),
      { available: 503550, current: -3550, limit: 500000 },
      'a negative usedAmount is a credit balance',
    );
    t.same(
      balance([], 'BRL'),
      { available: null, current: null, limit: null },
      'an empty list is "a ausência da informação": no figures, not zeros',
    );
    t.equal(mapCardAccount(card!, identification, [], HOLDER, 'BRL').currency, 'BRL');
    invalid(
      t,
      () => balance([line({ isLimitFlexible: false }, ['limitAmount'])]),
      /limitAmount.*isLimitFlexible/,
      'a fixed limit without its limitAmount ("obrigatório caso isLimitFlexible for igual a false")',
    );
    invalid(
      t,
      () =>
        balance([
          fixed('1111', '5000.00', '1200.00', '3800.00'),
          {
            ...fixed('2222', '2000.00', '500.00', '1500.00'),
            usedAmount: { amount: '500.00', currency: 'USD' },
          },
        ]),
      /usedAmount is in USD/,
      'lines in two currencies',
    );
  },
);

t.test('a card’s last four (credit cards 2.3.1 CreditCardsAccountPaymentMethod)', async (t) => {
  const [card] = (example(cardsBr, 'ResponseCreditCardAccountsList') as { data: ObCardAccount[] }).data;
  const limits = [
    {
      creditLineLimitType: 'LIMITE_CREDITO_TOTAL',
      consolidationType: 'CONSOLIDADO',
      identificationNumber: '4453',
      isLimitFlexible: false,
      limitAmount: { amount: '100.00', currency: 'BRL' },
      usedAmount: { amount: '0.00', currency: 'BRL' },
      availableAmount: { amount: '100.00', currency: 'BRL' },
    } as ObCardLimit,
  ];
  const last4 = (paymentMethod: ObCardIdentification['paymentMethod']) =>
    mapCardAccount(card!, { name: 'Cartão', paymentMethod }, limits, HOLDER).last4;
  const cases: [[string, boolean][], string, string][] = [
    [
      [
        ['1234', true],
        ['5678', false],
      ],
      '1234',
      'isMultipleCreditCard is a card with a debit function too, not an additional card: the first listed',
    ],
    [
      [
        ['AB12CD', false],
        ['5678', false],
      ],
      '5678',
      'a company’s identifier is no card number: the first four-digit one',
    ],
    [[['AB12CD', false]], '9087', 'none: the account id’s last digits, as before (XXZTR3459087)'],
  ];
  for (const [methods, expected, why] of cases) {
    const paymentMethod = methods.map(([identificationNumber, isMultipleCreditCard]) => ({
      identificationNumber,
      isMultipleCreditCard,
    }));
    t.equal(last4(paymentMethod), expected, why);
  }
});

t.test(
  'transaction types (EnumTransactionTypes, EnumCreditCardTransactionType), signs from creditDebitType',
  async (t) => {
    const enumOf = (schemas: Record<string, Schema>, name: string) => schemas[name]!.enum as string[];
    const deposit: Record<string, string> = {
      TED: 'transfer',
      DOC: 'transfer',
      PIX: 'transfer',
      TRANSFERENCIA_MESMA_INSTITUICAO: 'transfer',
      BOLETO: 'transfer',
      CONVENIO_ARRECADACAO: 'transfer',
      PACOTE_TARIFA_SERVICOS: 'fee',
      TARIFA_SERVICOS_AVULSOS: 'fee',
      FOLHA_PAGAMENTO: 'salary',
      DEPOSITO: 'deposit',
      SAQUE: 'withdrawal',
      CARTAO: 'card_purchase',
      ENCARGOS_JUROS_CHEQUE_ESPECIAL: 'interest',
      RENDIMENTO_APLIC_FINANCEIRA: 'interest',
      PORTABILIDADE_SALARIO: 'salary',
      RESGATE_APLIC_FINANCEIRA: 'transfer',
      OPERACAO_CREDITO: 'transfer',
      OUTROS: 'other',
    };
    t.same(
      enumOf(accountsBr, 'EnumTransactionTypes').sort(),
      Object.keys(deposit).sort(),
      'every value the file has',
    );
    const [row] = (example(accountsBr, 'ResponseAccountTransactions') as { data: ObTransaction[] }).data;
    for (const [type, expected] of Object.entries(deposit))
      for (const creditDebitType of ['CREDITO', 'DEBITO'] as const) {
        const movement = mapDepositTransaction(
          { ...row!, type, creditDebitType },
          'BRL',
          'America/Sao_Paulo',
        );
        t.equal(movement.type, expected, `${type} ${creditDebitType}`);
        t.equal(
          Math.sign(movement.amount),
          creditDebitType === 'CREDITO' ? 1 : -1,
          `${type} ${creditDebitType}: sign`,
        );
      }

    t.same(
      enumOf(cardsBr, 'EnumCreditCardTransactionType').sort(),
      ['CASHBACK', 'ESTORNO', 'OPERACOES_CREDITO_CONTRATADAS_CARTAO', 'OUTROS', 'PAGAMENTO', 'TARIFA'],
      'every value the file has',
    );
    const [charge] = (
      example(cardsBr, 'ResponseCreditCardAccountsTransactions') as { data: ObCardTransaction[] }
    ).data;
    const card = (patch: Partial<ObCardTransaction>, drop: (keyof ObCardTransaction)[] = []) => {
      const out: Partial<ObCardTransaction> = { ...charge!, ...patch };
      for (const key of drop) delete out[key];
      const [checked] = checkerBr.check<{ data: ObCardTransaction[] }>('creditCardTransactions', {
        ...(example(cardsBr, 'ResponseCreditCardAccountsTransactions') as object),
        data: [out],
      }).data;
      const movement = mapCardTransaction(checked!, 'BRL', 'America/Sao_Paulo');
      return [movement.type, Math.sign(movement.amount)];
    };
    const purchase = {
      transactionType: 'PAGAMENTO',
      creditDebitType: 'DEBITO',
      paymentType: 'A_VISTA',
    } as const;
    t.same(card({ ...purchase, payeeMCC: 5411 }), ['card_purchase', -1], 'PAGAMENTO, a debit: a purchase');
    t.same(
      card({ ...purchase, payeeMCC: 6011 }),
      ['withdrawal', -1],
      'PAGAMENTO at MCC 6011 (automated cash disbursement): a withdrawal',
    );
    t.same(card({ ...purchase, payeeMCC: 6010 }), ['withdrawal', -1], 'MCC 6010 (manual cash disbursement)');
    t.same(card({ ...purchase }, ['payeeMCC']), ['card_purchase', -1], 'no MCC: a purchase');
    t.same(
      card({ ...purchase, creditDebitType: 'CREDITO' }),
      ['transfer', 1],
      'PAGAMENTO, a credit: the bill paid, which lowers the debt (money into the card)',
    );
    t.same(card({ transactionType: 'TARIFA', creditDebitType: 'DEBITO', feeType: 'ANUIDADE' }), ['fee', -1]);
    t.same(
      card({ transactionType: 'TARIFA', creditDebitType: 'CREDITO', feeType: 'ANUIDADE' }),
      ['fee', 1],
      'a fee waived',
    );
    t.same(
      card({ transactionType: 'ESTORNO', creditDebitType: 'CREDITO' }),
      ['card_purchase', 1],
      'ESTORNO: a purchase reversed, a credit to the card',
    );
    t.same(
      card({ transactionType: 'CASHBACK', creditDebitType: 'CREDITO' }),
      ['card_purchase', 1],
      'CASHBACK: money back on purchases, a credit to the card',
    );
    const credit = {
      transactionType: 'OPERACOES_CREDITO_CONTRATADAS_CARTAO',
      creditDebitType: 'DEBITO',
    } as const;
    t.same(
      card({ ...credit, otherCreditsType: 'CREDITO_ROTATIVO' }),
      ['interest', -1],
      'revolving credit: its charges',
    );
    t.same(
      card({ ...credit, otherCreditsType: 'PARCELAMENTO_FATURA' }),
      ['transfer', -1],
      'a bill in instalments',
    );
    t.same(card({ ...credit, otherCreditsType: 'EMPRESTIMO' }), ['transfer', -1], 'a loan on the card');
    t.same(
      card({ ...credit, otherCreditsType: 'OUTROS', otherCreditsAdditionalInfo: 'x' }),
      ['transfer', -1],
      'another credit operation',
    );
    t.same(card({ transactionType: 'OUTROS', creditDebitType: 'DEBITO', transactionalAdditionalInfo: 'x' }), [
      'other',
      -1,
    ]);
  },
);

t.test(
  'Brazil’s answers as published (accounts 2.4.2, credit cards 2.3.1): BRL, CPF/CNPJ, the day in São Paulo',
  async (t) => {
    const list = checkerBr.check<{ data: ObAccount[] }>(
      'accounts',
      example(accountsBr, 'ResponseAccountList'),
    );
    const balances = checkerBr.check<{ data: ObBalances }>(
      'balances',
      example(accountsBr, 'ResponseAccountBalances'),
    );
    t.same(
      mapDepositAccount(list.data[0]!, balances.data, HOLDER).balance,
      { available: 100004, current: 200008, limit: null },
      'AccountBalancesData: available plus blocked; automaticallyInvestedAmount is not the account’s',
    );

    const answer = example(accountsBr, 'ResponseAccountTransactions') as { data: ObTransaction[] };
    answer.data[0]!.transactionDateTime = '2024-03-01T02:30:00.000Z';
    const [row] = checkerBr.check<{ data: ObTransaction[] }>('transactions', answer).data;
    const movement = mapDepositTransaction(row!, 'BRL', 'America/Sao_Paulo');
    t.same(
      movement.counterparty,
      { name: '', rut: null, bankId: null, accountLast4: '4360' },
      'partieCnpjCpf is a CPF (43908445778), never read as a RUT',
    );
    t.equal(
      movement.transactionDate,
      '2024-02-29',
      '02:30 UTC is 23:30 the day before in Brasília time (UTC−3)',
    );
    t.equal(
      movement.postedAt,
      Date.parse('2024-03-01T02:30:00.000Z'),
      'transactionDateTime, the original instant',
    );
    for (const [status, pending] of PENDING_BY_STATUS)
      t.equal(
        mapDepositTransaction({ ...row!, completedAuthorisedPaymentType: status }, 'BRL', 'America/Sao_Paulo')
          .pending,
        pending,
        `${status}: its transactionId ${pending ? 'may still change' : 'is final'}`,
      );
    t.ok(
      Object.is(
        mapDepositTransaction({ ...row!, transactionAmount: { amount: '0.0040', currency: 'BRL' } }, 'BRL')
          .amount,
        0,
      ),
      'a debit that rounds to nothing is 0, not −0',
    );

    const cardAnswer = example(cardsBr, 'ResponseCreditCardAccountsTransactions') as {
      data: ObCardTransaction[];
    };
    Object.assign(cardAnswer.data[0]!, {
      transactionType: 'PAGAMENTO',
      creditDebitType: 'DEBITO',
      amount: { amount: '20.00', currency: 'USD' },
      brazilianAmount: { amount: '110.4567', currency: 'BRL' },
    });
    const [charge] = checkerBr.check<{ data: ObCardTransaction[] }>(
      'creditCardTransactions',
      cardAnswer,
    ).data;
    const international = mapCardTransaction(charge!, 'BRL', 'America/Sao_Paulo');
    t.same(
      [international.amount, international.currency, international.pending],
      [-11046, 'BRL', false],
      'an international purchase: brazilianAmount (in BRL), not amount (USD); on a closed bill: booked',
    );
    const { billId: _billId, ...open } = charge!;
    t.equal(
      mapCardTransaction(open, 'BRL', 'America/Sao_Paulo').pending,
      true,
      'no billId: on the open bill ("fatura aberta"), its transactionId not yet final',
    );
    t.ok(
      Object.is(
        mapCardTransaction({ ...charge!, brazilianAmount: { amount: '0.0040', currency: 'BRL' } }, 'BRL')
          .amount,
        0,
      ),
      'no −0 on a card either',
    );
  },
);

t.test('pending and booked, sign, and the day in Chile', async (t) => {
  const base = toChile(example(accounts, 'ResponseAccountTransactions')) as { data: ObTransaction[] };
  const row = base.data[0]!;
  for (const [status, pending] of PENDING_BY_STATUS)
    t.equal(
      mapDepositTransaction({ ...row, completedAuthorisedPaymentType: status }, 'CLP').pending,
      pending,
      status,
    );
  t.equal(
    mapDepositTransaction({ ...row, creditDebitType: 'CREDITO' }, 'CLP').amount,
    1000,
    'a credit is money in',
  );
  t.equal(mapDepositTransaction({ ...row, type: 'FOLHA_PAGAMENTO' }, 'CLP').type, 'salary');
  t.equal(mapDepositTransaction({ ...row, type: 'SOMETHING_NEW' }, 'CLP').type, 'other');
  t.equal(mapDepositTransaction({ ...row, type: 'constructor' }, 'CLP').type, 'other', 'no inherited key');
  // 02:00 UTC on 1 March 2024 is 23:00 on 29 February in Santiago (summer time, UTC-3).
  t.equal(chileanDate(Date.parse('2024-03-01T02:00:00.000Z')), '2024-02-29');
  t.equal(chileanDate(Date.parse('2024-07-01T03:30:00.000Z')), '2024-06-30', 'winter time, UTC-4');
  const again = mapDepositTransaction(row, 'CLP');
  t.same(
    mapDepositTransaction(structuredClone(row), 'CLP'),
    again,
    'the same answer maps the same: refs are stable',
  );

  const cardRows = toChile(example(cards, 'ResponseCreditCardAccountsTransactions')) as {
    data: ObCardTransaction[];
  };
  const { billId: _billId, ...unbilled } = cardRows.data[0]!;
  t.equal(mapCardTransaction(unbilled, 'CLP').pending, true, 'not on a bill yet: pending');
  t.equal(mapCardTransaction({ ...cardRows.data[0]!, creditDebitType: 'DEBITO' }, 'CLP').amount < 0, true);
  t.equal(
    mapCardTransaction(
      { ...cardRows.data[0]!, creditDebitType: 'CREDITO', transactionType: 'ESTORNO' },
      'CLP',
    ).amount > 0,
    true,
    'a refund is money in',
  );
});

t.test('hostile and broken answers are invalid_bank_data with a reason, never a crash', async (t) => {
  const good = toChile(example(accounts, 'ResponseAccountTransactions')) as {
    data: Record<string, unknown>[];
    links: unknown;
    meta: unknown;
  };
  const withRow = (patch: Record<string, unknown>) => ({ ...good, data: [{ ...good.data[0], ...patch }] });
  const secret = 'hunter2-PASSWORD';
  const cases: [string, unknown, RegExp][] = [
    ['null', null, /must be object/],
    ['a string', 'nope', /must be object/],
    ['an array', [], /must be object/],
    ['no data', { links: good.links, meta: good.meta }, /required property 'data'/],
    ['data not a list', { ...good, data: {} }, /\/data must be array/],
    [
      'a row missing its id',
      { ...good, data: [{ ...good.data[0], transactionId: undefined }] },
      /transactionId/,
    ],
    ['an id with spaces', withRow({ transactionId: 'a b' }), /transactionId/],
    [
      'a numeric amount',
      withRow({ transactionAmount: { amount: 1500, currency: 'CLP' } }),
      /amount must be string/,
    ],
    ['a negative magnitude', withRow({ transactionAmount: { amount: '-15.00', currency: 'CLP' } }), /amount/],
    [
      'an unknown status',
      withRow({ completedAuthorisedPaymentType: 'MAYBE' }),
      /completedAuthorisedPaymentType/,
    ],
    ['a bad sign', withRow({ creditDebitType: 'BOTH' }), /creditDebitType/],
    ['a RUT with dots', withRow({ partieCnpjCpf: '11.111.111-1' }), /partieCnpjCpf/],
    [
      'a date without milliseconds',
      withRow({ transactionDateTime: '2024-01-01T00:00:00Z' }),
      /transactionDateTime/,
    ],
    ['a huge description', withRow({ transactionName: secret.repeat(50) }), /transactionName/],
  ];
  for (const [what, body, reason] of cases) {
    invalid(t, () => checker.check('transactions', JSON.parse(JSON.stringify(body ?? null))), reason, what);
    try {
      checker.check('transactions', body);
    } catch (error) {
      t.notMatch((error as Error).message, secret, `${what}: the data is not echoed`);
    }
  }
  const polluted = JSON.parse(
    `{"data":[],"links":{"self":"x"},"meta":{"requestDateTime":"2024-01-01T00:00:00Z"},"__proto__":{"polluted":true}}`,
  );
  t.doesNotThrow(() => checker.check('transactions', polluted), 'a __proto__ key is just a key');
  t.equal(({} as Record<string, unknown>).polluted, undefined);

  // What the schema lets through but the mapping cannot hold.
  const row = good.data[0] as unknown as ObTransaction;
  invalid(
    t,
    () =>
      mapAll([row, { ...row, transactionDateTime: '2024-02-31T10:00:00.000Z' }], (r) =>
        mapDepositTransaction(r, 'CLP'),
      ),
    /transaction 1: transactionDateTime is not a real date/,
    'the 31st of February',
  );
  invalid(
    t,
    () => mapDepositTransaction({ ...row, transactionAmount: { amount: '1500.50', currency: 'CLP' } }, 'CLP'),
    /CLP/,
    'centavos',
  );
  invalid(
    t,
    () => mapDepositTransaction({ ...row, transactionAmount: { amount: '15.00', currency: 'USD' } }, 'CLP'),
    /USD, the account in CLP/,
    'another currency',
  );
  invalid(
    t,
    () => mapCardAccount({} as ObCardAccount, null, [], HOLDER),
    /limits list is empty/,
    'a card without limits, and no currency to state them in',
  );
});

t.test("the holder's name as the bank vouches for it (issue 45)", async (t) => {
  t.equal(
    holderNameOf('  María  José\tPérez\u202e '),
    'María José Pérez',
    'one line, no bidi, spaces collapsed',
  );
  t.equal(holderNameOf('Jose\u0301'), 'José', 'NFC: the composed form the console and the search see');
  for (const bad of [undefined, null, 42, '', ' \u0000 ', 'x'.repeat(201)])
    t.equal(holderNameOf(bad), null, `${JSON.stringify(bad)?.slice(0, 20)}: no name`);
  // customers 2.2.1 PersonalIdentificationData: socialName when there is one, else civilName; the newest record.
  t.equal(
    identificationName([{ civilName: 'Juan Kaique Cláudio Fernandes' }]),
    'Juan Kaique Cláudio Fernandes',
  );
  t.equal(
    identificationName([{ civilName: 'Juan Fernandes', socialName: 'Jaqueline de Freitas' }]),
    'Jaqueline de Freitas',
  );
  t.equal(
    identificationName([{ civilName: 'Ana', socialName: '  ' }]),
    'Ana',
    'an empty social name is none',
  );
  t.equal(
    identificationName([
      { civilName: 'Old Name', updateDateTime: '2021-05-21T08:30:00Z' },
      { civilName: 'New Name', updateDateTime: '2024-01-02T08:30:00Z' },
      { civilName: 'Undated' },
    ]),
    'New Name',
  );
  t.equal(identificationName([]), null);

  const checker = createAnswerChecker('BR');
  const answer = { data: [{ civilName: 'Ana Souza', personalId: 'x' }], links: {}, meta: {} };
  t.same(checker.check('identification', answer), answer, 'the members read pass; others are not looked at');
  for (const [bad, why] of [
    [{ data: [] }, /must NOT have fewer than 1 items/],
    [{ data: [{ socialName: 'Ana' }] }, /must have required property 'civilName'/],
    [{ data: [{ civilName: 'x'.repeat(71) }] }, /must NOT have more than 70 characters/],
    [{ data: [{ civilName: 7 }] }, /must be string/],
  ] as const)
    invalid(t, () => checker.check('identification', bad), why, JSON.stringify(bad).slice(0, 40));
});
