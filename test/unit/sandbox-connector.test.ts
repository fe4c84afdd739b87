import t from 'tap';
import type { Test } from 'tap';
import {
  ConnectorError,
  type BankAccount,
  type BankMovement,
  type BankSession,
  type Connector,
  type HolderType,
  type LoginRequest,
} from '../../src/banks/connector.js';
import { BUILT_IN_INSTITUTIONS } from '../../src/banks/institutions.js';
import { createSandboxConnector } from '../../src/banks/sandbox/sandbox-connector.js';

const DAY = 86_400_000;
const NOW = Date.UTC(2026, 0, 15, 12, 0, 0);

interface Who {
  bankId?: string;
  holderType?: HolderType;
  rut?: string;
  rutEmpresa?: string | null;
  password?: string;
  interactive?: boolean;
  attempts?: number;
  successes?: number;
  now?: number;
}

function request(who: Who = {}): LoginRequest {
  return {
    bankId: who.bankId ?? 'bancochile',
    holderType: who.holderType ?? 'individual',
    credentials: {
      rut: who.rut ?? '11111111-1',
      password: who.password ?? 'sandbox',
      rutEmpresa: who.rutEmpresa ?? null,
    },
    now: who.now ?? NOW,
    interactive: who.interactive ?? false,
    history: { attempts: who.attempts ?? 0, successes: who.successes ?? 0 },
  };
}

async function login(connector: Connector, who: Who = {}): Promise<BankSession> {
  const result = await connector.login(request(who));
  if (result.kind !== 'session') throw new Error(`expected a session, got ${result.kind}`);
  return result.session;
}

async function accountsOf(connector: Connector, who: Who = {}, now = NOW): Promise<BankAccount[]> {
  return connector.listAccounts(await login(connector, who), now);
}

function byRefPrefix(accounts: BankAccount[], prefix: string): BankAccount {
  const account = accounts.find((candidate) => candidate.ref.startsWith(`${prefix}-`));
  if (!account) throw new Error(`no ${prefix} account among ${accounts.map((a) => a.ref).join(', ')}`);
  return account;
}

const isoDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
const failsWith = (code: string) => ({ name: 'ConnectorError', code });

/** Holders used across tests: individuals and businesses at several banks. */
const HOLDERS: Who[] = [
  { bankId: 'bancochile', rut: '11111111-1' },
  { bankId: 'santander', rut: '55.555.555-5' },
  { bankId: 'falabella', rut: '66666666-6' },
  { bankId: 'bci', holderType: 'business', rut: '22222222-2', rutEmpresa: '77777777-7' },
  { bankId: 'itau', holderType: 'business', rut: '11111111-1', rutEmpresa: '76543210-3' },
  // The busy holder: every property above holds for ten times the rows.
  { bankId: 'bancochile', rut: '21.212.121-5' },
];

t.test('the same inputs give deep-equal outputs, from two separate connectors', async (t) => {
  for (const who of HOLDERS) {
    const a = createSandboxConnector();
    const b = createSandboxConnector();
    const sessionA = await login(a, who);
    const sessionB = await login(b, who);
    t.same(sessionA, sessionB, `${who.bankId} session`);
    const accountsA = await a.listAccounts(sessionA, NOW);
    t.same(accountsA, await b.listAccounts(sessionB, NOW), `${who.bankId} accounts`);
    for (const account of accountsA) {
      const window = { from: NOW - 60 * DAY, to: NOW };
      const rows = await a.listMovements(sessionA, account, window, NOW);
      t.ok(rows.length > 0, `${account.name} has movements`);
      t.same(
        rows,
        await b.listMovements(sessionB, account, window, NOW),
        `${who.bankId} ${account.name} movements`,
      );
    }
  }
});

t.test('no clock and no randomness: Date.now and Math.random are never called', async (t) => {
  const realNow = Date.now;
  const realRandom = Math.random;
  Date.now = () => {
    throw new Error('Date.now called');
  };
  Math.random = () => {
    throw new Error('Math.random called');
  };
  try {
    const connector = createSandboxConnector();
    for (const who of HOLDERS) {
      const session = await login(connector, who);
      for (const account of await connector.listAccounts(session, NOW))
        await connector.listMovements(session, account, { from: NOW - 30 * DAY, to: NOW }, NOW);
    }
    t.pass('a full run without the clock or Math.random');
  } finally {
    Date.now = realNow;
    Math.random = realRandom;
  }
});

t.test('scenarios by password', async (t) => {
  const connector = createSandboxConnector();
  t.equal(
    (await connector.login(request({ password: 'sandbox', interactive: true }))).kind,
    'session',
    'sandbox succeeds',
  );
  await t.rejects(
    connector.login(request({ password: 'sandbox-rejected' })),
    failsWith('rejected_credentials'),
  );
  for (let attempts = 0; attempts < 5; attempts++)
    await t.rejects(
      connector.login(request({ password: 'sandbox-unavailable', attempts })),
      failsWith('bank_unavailable'),
    );
  const unavailable = await connector
    .login(request({ password: 'sandbox-unavailable' }))
    .catch((error: unknown) => error);
  t.ok(unavailable instanceof ConnectorError && unavailable.retryable, 'bank_unavailable is retryable');

  for (let attempts = 0; attempts < 6; attempts++) {
    const flaky = connector.login(
      request({ password: 'sandbox-flaky', attempts, successes: Math.ceil(attempts / 2) }),
    );
    if (attempts % 2 === 1)
      await t.rejects(flaky, failsWith('bank_unavailable'), `flaky attempt ${attempts} fails`);
    else t.equal((await flaky).kind, 'session', `flaky attempt ${attempts} succeeds`);
  }

  t.equal(
    (await connector.login(request({ password: 'sandbox-expiring' }))).kind,
    'session',
    'expiring: first sync succeeds',
  );
  for (const attempts of [1, 2, 3, 4])
    await t.rejects(
      connector.login(request({ password: 'sandbox-expiring', attempts, successes: 1 })),
      failsWith('rejected_credentials'),
      `expiring: attempt ${attempts} after a success is rejected`,
    );

  for (const password of [
    '',
    'Sandbox',
    'sandbox ',
    'password',
    'sandbox-other',
    '123456',
    'toString',
    '__proto__',
  ])
    await t.rejects(
      connector.login(request({ password })),
      failsWith('rejected_credentials'),
      `password "${password}"`,
    );
});

t.test('RUTs and holders are checked before the password', async (t) => {
  const connector = createSandboxConnector();
  for (const rut of ['11111111-2', '12345678-9', '', 'abc', '11.111.111-K'])
    await t.rejects(connector.login(request({ rut })), failsWith('rejected_credentials'), `RUT "${rut}"`);
  t.equal(
    (await connector.login(request({ rut: '11.111.111-1' }))).kind,
    'session',
    'dots and hyphen are accepted',
  );
  t.equal((await connector.login(request({ rut: '111111111' }))).kind, 'session', 'no hyphen is accepted');
  await t.rejects(
    connector.login(request({ holderType: 'business', rutEmpresa: null })),
    failsWith('rejected_credentials'),
    'a business login needs rutEmpresa',
  );
  await t.rejects(
    connector.login(request({ holderType: 'business', rutEmpresa: '76543210-4' })),
    failsWith('rejected_credentials'),
    'rutEmpresa with a wrong check digit',
  );
  await t.rejects(connector.login(request({ bankId: 'nobank' })), failsWith('unsupported'), 'unknown bank');
  await t.rejects(
    connector.login(request({ bankId: 'falabella', holderType: 'business', rutEmpresa: '76543210-3' })),
    failsWith('unsupported'),
    'falabella has no business holders',
  );
});

t.test('MFA: interactive logins ask for 123456, scheduled ones do not', async (t) => {
  const connector = createSandboxConnector();
  const who: Who = { password: 'sandbox-mfa', interactive: true, successes: 1, attempts: 1 };
  const result = await connector.login(request(who));
  if (result.kind !== 'mfa') throw new Error('expected an MFA challenge');
  t.equal(result.challenge.expiresAt, NOW + 5 * 60_000, 'expires 5 minutes after now by default');
  const challenge = JSON.parse(JSON.stringify(result.challenge)) as typeof result.challenge;
  t.same(challenge, result.challenge, 'the challenge survives a JSON round trip');

  const session = await connector.submitMfa(request({ ...who, now: NOW + 60_000 }), challenge, '123456');
  t.same(
    session,
    await login(connector, { ...who, password: 'sandbox' }),
    'the right code gives the same session as a plain login',
  );
  t.same(
    await connector.submitMfa(request({ ...who, now: challenge.expiresAt }), challenge, ' 123456 '),
    session,
    'accepted up to expiresAt, surrounding spaces ignored',
  );

  for (const code of ['000000', '12345', '1234567', ''])
    await t.rejects(
      connector.submitMfa(request({ ...who, now: NOW + 1_000 }), challenge, code),
      failsWith('mfa_invalid'),
      `code "${code}"`,
    );
  await t.rejects(
    connector.submitMfa(request({ ...who, now: challenge.expiresAt + 1 }), challenge, '123456'),
    failsWith('mfa_expired'),
    'the right code after expiresAt',
  );
  await t.rejects(
    connector.submitMfa(
      request({ ...who, now: NOW + 1_000 }),
      { expiresAt: NOW + 60_000, state: { nope: true } },
      '123456',
    ),
    failsWith('mfa_invalid'),
    'a challenge the sandbox did not issue',
  );

  t.equal(
    (await connector.login(request({ ...who, interactive: false }))).kind,
    'session',
    'a scheduled login succeeds without MFA',
  );

  const short = createSandboxConnector({ mfaTtlMs: 30_000 });
  const shortResult = await short.login(request(who));
  t.equal(
    shortResult.kind === 'mfa' && shortResult.challenge.expiresAt,
    NOW + 30_000,
    'mfaTtlMs sets the lifetime',
  );
  t.throws(() => createSandboxConnector({ mfaTtlMs: 0 }), RangeError);
});

t.test('every one of the 11 banks logs in, for each holder type it offers', async (t) => {
  const connector = createSandboxConnector();
  const credentialBanks = BUILT_IN_INSTITUTIONS.filter((institution) => !institution.consentSandbox);
  t.equal(credentialBanks.length, 11);
  for (const institution of credentialBanks)
    for (const holderType of institution.holderTypes) {
      const who: Who = {
        bankId: institution.id,
        holderType,
        rutEmpresa: holderType === 'business' ? '76543210-3' : null,
      };
      const session = await login(connector, who);
      t.ok(session.holderName.length > 3, `${institution.id} ${holderType}: ${session.holderName}`);
      const accounts = await connector.listAccounts(session, NOW);
      const checking = byRefPrefix(accounts, 'CC');
      const card = byRefPrefix(accounts, 'TC');
      t.match(checking, { type: 'checking', currency: 'CLP', balance: { limit: null } });
      t.match(card, { type: 'credit_card', currency: 'CLP' });
      t.ok(card.balance.limit !== null && card.balance.limit > 0, 'the card has a limit');
      t.equal(new Set(accounts.map((a) => a.ref)).size, accounts.length, 'refs are distinct');
      t.equal(new Set(accounts.map((a) => a.last4)).size, accounts.length, 'last4 are distinct');
      for (const account of accounts) {
        t.match(account.last4, /^\d{4}$/);
        t.equal(account.holderName, session.holderName);
        for (const value of Object.values(account.balance))
          t.ok(value === null || Number.isInteger(value), 'integer balances');
      }
    }
  const a = await accountsOf(connector, { bankId: 'bci' });
  const b = await accountsOf(connector, { bankId: 'itau' });
  t.not(byRefPrefix(a, 'CC').ref, byRefPrefix(b, 'CC').ref, 'refs differ between banks');
  const later = await accountsOf(connector, { bankId: 'bci' }, NOW + 40 * DAY);
  t.equal(byRefPrefix(later, 'CC').ref, byRefPrefix(a, 'CC').ref, 'refs are stable over time');
});

t.test('the documented example RUTs have the documented accounts', async (t) => {
  const connector = createSandboxConnector();
  const examples: Array<[Who, string, string[]]> = [
    [{ rut: '11.111.111-1' }, 'Nicolás Silva Soto', ['CC', 'TC', 'CA', 'CV']],
    [{ rut: '22.222.222-2' }, 'Antonia Pizarro Pérez', ['CC', 'TC', 'CV']],
    [{ rut: '21.212.121-5' }, 'Catalina Núñez Contreras', ['CC', 'TC', 'CA', 'CV']],
    [{ rut: '55.555.555-5' }, 'Vicente Morales Soto', ['CC', 'TC', 'CA', 'CD', 'CV']],
    [{ rut: '66.666.666-6' }, 'Juan Pablo Castro Hernández', ['CC', 'TC', 'CD', 'CV']],
    [
      { holderType: 'business', rutEmpresa: '76.543.210-3' },
      'Distribuidora Mar Azul S.A.',
      ['CC', 'TC', 'CV'],
    ],
    [{ holderType: 'business', rutEmpresa: '76.000.001-9' }, '', ['CC', 'TC', 'CA', 'CV']],
    [
      { holderType: 'business', rutEmpresa: '77.777.777-7' },
      'Distribuidora Austral Ltda.',
      ['CC', 'TC', 'CA', 'CD', 'CV'],
    ],
  ];
  for (const [who, name, prefixes] of examples)
    for (const bankId of ['bancochile', 'security']) {
      const session = await login(connector, { ...who, bankId });
      if (name) t.equal(session.holderName, name, `${who.rut ?? who.rutEmpresa} is ${name}`);
      const accounts = await connector.listAccounts(session, NOW);
      t.same(
        accounts.map((a) => a.ref.split('-')[0]),
        prefixes,
        `${bankId} ${who.rut ?? who.rutEmpresa}: ${accounts.map((a) => a.name).join(', ')}`,
      );
      const usd = accounts.find((a) => a.currency === 'USD');
      if (usd) t.equal(usd.type, 'checking', 'the USD account is a checking account');
    }
});

t.test(
  'the busy holder (21.212.121-5) has over 1,000 movements in 90 days, spending as others do',
  async (t) => {
    const connector = createSandboxConnector();
    const busy = await login(connector, { rut: '21.212.121-5' });
    const ordinary = await login(connector, { rut: '11.111.111-1' });
    for (const now of [NOW, NOW + 45 * DAY + 3_600_000, NOW + 200 * DAY]) {
      const window = { from: now - 90 * DAY, to: now + 1 };
      const rowsOf = async (session: BankSession) =>
        (
          await Promise.all(
            (await connector.listAccounts(session, now)).map((account) =>
              connector.listMovements(session, account, window, now),
            ),
          )
        ).flat();
      const many = await rowsOf(busy);
      const few = await rowsOf(ordinary);
      t.ok(many.length >= 1_000, `${many.length} movements in the 90 days to ${isoDay(now)}`);
      t.ok(few.length < 200, `an ordinary holder has ${few.length}`);
      const spent = (rows: BankMovement[]) =>
        -rows
          .filter((row) => row.type === 'card_purchase' && !row.pending)
          .reduce((sum, row) => sum + row.amount, 0);
      const ratio = spent(many) / spent(few);
      t.ok(
        ratio > 0.3 && ratio < 3,
        `card spending of the same order (${ratio.toFixed(2)}x), in smaller amounts`,
      );
    }
    const { CONSENT_BANK_USERS } = await import('../../src/consent-bank/users.js');
    t.ok(
      CONSENT_BANK_USERS.some((user) => user.rut === '21212121-5' && /busy/.test(user.note)),
      'the consent bank has the same busy holder as a sandbox user',
    );
  },
);

t.test('an account appears and another disappears after two successful syncs', async (t) => {
  const connector = createSandboxConnector();
  const refsAt = async (successes: number) =>
    (await accountsOf(connector, { successes, attempts: successes + 3 })).map((a) => a.ref.split('-')[0]);
  for (const successes of [0, 1])
    t.same(await refsAt(successes), ['CC', 'TC', 'CA', 'CV'], `successes ${successes}`);
  for (const successes of [2, 3, 10])
    t.same(await refsAt(successes), ['CC', 'TC', 'CA', 'AV'], `successes ${successes}`);
  const before = await accountsOf(connector, { successes: 0 });
  const after = await accountsOf(connector, { successes: 2 });
  t.same(
    before.filter((a) => !a.ref.startsWith('CV-')),
    after.filter((a) => !a.ref.startsWith('AV-')),
    'the other accounts are unchanged',
  );
  t.match(byRefPrefix(after, 'AV'), { type: 'savings', currency: 'CLP', name: 'Cuenta de Ahorro Vivienda' });
  t.match(byRefPrefix(before, 'CV'), { type: 'checking', currency: 'CLP', name: 'Cuenta Vista' });
});

t.test('a later now finds everything an earlier one did, plus newer rows', async (t) => {
  const connector = createSandboxConnector();
  for (const who of HOLDERS) {
    const session = await login(connector, who);
    for (const account of await connector.listAccounts(session, NOW)) {
      const from = NOW - 40 * DAY;
      let previous = await connector.listMovements(session, account, { from, to: NOW + 30 * DAY }, NOW);
      for (const step of [1, 3, 10, 29]) {
        const now = NOW + step * DAY;
        const rows = await connector.listMovements(session, account, { from, to: NOW + 30 * DAY }, now);
        const byRef = new Map(rows.map((row) => [row.ref, row]));
        for (const row of previous) {
          if (row.pending && row.postedAt + 2 * DAY < now) {
            t.notOk(byRef.has(row.ref), 'a pending row that posted is gone');
            continue;
          }
          if (!byRef.has(row.ref)) t.fail(`${account.name}: ${row.ref} missing at +${step}d`);
          else t.same(byRef.get(row.ref), row);
        }
        t.ok(
          rows.length >= previous.length - previous.filter((r) => r.pending).length,
          'nothing else is lost',
        );
        t.ok(
          rows.every((row) => row.postedAt < now),
          'no row is booked in the future',
        );
        previous = rows;
      }
    }
  }
});

t.test('overlapping windows give identical rows', async (t) => {
  const connector = createSandboxConnector();
  for (const who of HOLDERS) {
    const session = await login(connector, who);
    for (const account of await connector.listAccounts(session, NOW)) {
      const inRange = (rows: BankMovement[], from: number, to: number) =>
        rows.filter((r) => r.postedAt >= from && r.postedAt < to);
      const a = await connector.listMovements(
        session,
        account,
        { from: NOW - 50 * DAY, to: NOW - 10 * DAY },
        NOW,
      );
      const b = await connector.listMovements(session, account, { from: NOW - 30 * DAY, to: NOW }, NOW);
      t.same(
        inRange(a, NOW - 30 * DAY, NOW - 10 * DAY),
        inRange(b, NOW - 30 * DAY, NOW - 10 * DAY),
        `${account.name}: same now`,
      );
      const c = await connector.listMovements(
        session,
        account,
        { from: NOW - 25 * DAY, to: NOW + 5 * DAY },
        NOW + 7 * DAY,
      );
      t.same(
        inRange(a, NOW - 25 * DAY, NOW - 10 * DAY),
        inRange(c, NOW - 25 * DAY, NOW - 10 * DAY),
        `${account.name}: later now`,
      );
      // Odd boundaries: windows that start and end mid-day split the same rows.
      const cut = NOW - 17 * DAY + 12_345_678;
      const left = await connector.listMovements(session, account, { from: NOW - 50 * DAY, to: cut }, NOW);
      const right = await connector.listMovements(session, account, { from: cut, to: NOW }, NOW);
      const whole = await connector.listMovements(session, account, { from: NOW - 50 * DAY, to: NOW }, NOW);
      t.same([...left, ...right], whole, `${account.name}: adjacent windows add up to the whole`);
    }
  }
});

t.test('salary on the last working day of every month, stable amount, same employer', async (t) => {
  const connector = createSandboxConnector();
  for (const bankId of ['bancochile', 'bice']) {
    const session = await login(connector, { bankId, rut: '11111111-1' });
    const checking = byRefPrefix(await connector.listAccounts(session, NOW), 'CC');
    const salaries: BankMovement[] = [];
    for (let month = 0; month < 14; month++) {
      const from = Date.UTC(2025, month, 1);
      const to = Date.UTC(2025, month + 1, 1);
      const rows = await connector.listMovements(session, checking, { from, to }, to + DAY);
      const paid = rows.filter((row) => row.type === 'salary');
      t.equal(paid.length, 1, `one salary in ${isoDay(from).slice(0, 7)}`);
      let last = new Date(to - DAY);
      while (last.getUTCDay() === 0 || last.getUTCDay() === 6) last = new Date(last.getTime() - DAY);
      t.equal(
        paid[0]?.transactionDate,
        isoDay(last.getTime()),
        `paid on ${isoDay(last.getTime())}, a ${last.toUTCString().slice(0, 3)}`,
      );
      salaries.push(...paid);
    }
    const amounts = salaries.map((s) => s.amount).sort((x, y) => x - y);
    const median = amounts[amounts.length >> 1] ?? 0;
    t.ok(median >= 1_200_000 * 0.98 && median <= 2_500_000 * 1.02, `salary around ${median}`);
    t.ok(
      amounts.every((a) => a > 0 && Math.abs(a - median) <= median * 0.04),
      'within a few percent of the median every month',
    );
    t.equal(new Set(salaries.map((s) => JSON.stringify(s.counterparty))).size, 1, 'always the same employer');
    t.match(salaries[0]?.counterparty, { name: /\S/, rut: /^\d{7,8}-[\dK]$/ });
    t.equal(new Set(salaries.map((s) => s.referenceId)).size, salaries.length, 'a referenceId per salary');
  }
  const business = await login(connector, { holderType: 'business', rutEmpresa: '77777777-7' });
  const checking = byRefPrefix(await connector.listAccounts(business, NOW), 'CC');
  const rows = await connector.listMovements(business, checking, { from: NOW - 60 * DAY, to: NOW }, NOW);
  t.equal(rows.filter((row) => row.type === 'salary').length, 0, 'businesses get no salary');
  t.ok(
    rows.filter((row) => row.amount > 0 && row.description.startsWith('TRANSFERENCIA DE ')).length >= 10,
    'but customer transfers in',
  );
});

t.test(
  'card purchases are pending for 2 days, then posted with another ref and the same referenceId',
  async (t) => {
    const connector = createSandboxConnector();
    let checked = 0;
    for (const who of HOLDERS) {
      const session = await login(connector, who);
      const card = byRefPrefix(await connector.listAccounts(session, NOW), 'TC');
      let pendingSeen = 0;
      for (const now of [NOW, NOW + DAY + 7_200_000, NOW + 3 * DAY + 3_600_000]) {
        const before = await connector.listMovements(session, card, { from: now - 10 * DAY, to: now }, now);
        const pending = before.filter((row) => row.pending);
        pendingSeen += pending.length;
        const referenceIds = new Set(pending.map((row) => row.referenceId));
        t.notOk(
          before.some((row) => !row.pending && referenceIds.has(row.referenceId)),
          'while pending, only the pending row is returned',
        );
        const later = now + 3 * DAY;
        const after = await connector.listMovements(
          session,
          card,
          { from: now - 10 * DAY, to: later },
          later,
        );
        for (const row of pending) {
          t.match(row.ref, /^P-/);
          t.ok(row.postedAt >= now - 2 * DAY, 'pending only for 2 days');
          t.notOk(
            after.some((other) => other.ref === row.ref),
            'the pending row is gone once posted',
          );
          const posted = after.filter((other) => other.referenceId === row.referenceId);
          t.equal(posted.length, 1, 'exactly one posted row');
          const [post] = posted;
          if (!post) continue;
          t.equal(post.pending, false);
          t.not(post.ref, row.ref, 'a different ref');
          t.equal(post.postedAt - row.postedAt, 2 * DAY, 'posted 2 days later');
          t.same(
            { ...post, ref: row.ref, postedAt: row.postedAt, pending: true },
            row,
            'otherwise identical',
          );
          checked++;
        }
        const old = before.filter((row) => !row.pending && row.type === 'card_purchase');
        t.ok(old.length > 0, 'older purchases are posted');
        for (const row of old)
          t.equal(
            Date.parse(`${row.transactionDate}T00:00:00Z`),
            Math.floor(row.postedAt / DAY) * DAY - 2 * DAY,
          );
      }
      t.ok(pendingSeen > 0, `${who.bankId}: ${pendingSeen} pending rows seen`);
    }
    t.ok(checked >= 10, `${checked} pending rows followed to their posted row`);
  },
);

/** Duplicate pairs and reversal pairs of a list, checked for their shape. */
function relationships(t: Test, rows: BankMovement[]): { duplicates: number; reversals: number } {
  const groups = new Map<string, BankMovement[]>();
  for (const row of rows)
    groups.set(row.referenceId ?? '', [...(groups.get(row.referenceId ?? '') ?? []), row]);
  let duplicates = 0;
  let reversals = 0;
  for (const [referenceId, group] of groups) {
    t.ok(referenceId, 'every row has a referenceId');
    if (group.length === 1) continue;
    t.equal(group.length, 2, `referenceId ${referenceId} is shared by a pair only`);
    const [a, b] = group as [BankMovement, BankMovement];
    t.not(a.ref, b.ref, 'the two rows have different refs');
    if (a.amount === b.amount) {
      t.same({ ...a, ref: null }, { ...b, ref: null }, 'a duplicate is identical but for its ref');
      duplicates++;
    } else {
      const [charge, reversal] = b.description.startsWith('REVERSO ') ? [a, b] : [b, a];
      t.equal(reversal.description, `REVERSO ${charge.description}`);
      t.equal(reversal.amount, -charge.amount, 'the reversal has the opposite amount');
      t.ok(charge.amount < 0, 'a charge is reversed');
      t.equal(Math.floor(reversal.postedAt / DAY) - Math.floor(charge.postedAt / DAY), 1, 'a day later');
      reversals++;
    }
  }
  return { duplicates, reversals };
}

t.test('duplicates and reversal pairs occur within any 60 days', async (t) => {
  const connector = createSandboxConnector();
  for (const who of HOLDERS)
    for (const now of [NOW, NOW + 100 * DAY, NOW + 333 * DAY]) {
      const session = await login(connector, who);
      const checking = byRefPrefix(await connector.listAccounts(session, now), 'CC');
      const rows = await connector.listMovements(session, checking, { from: now - 60 * DAY, to: now }, now);
      const found = relationships(t, rows);
      t.ok(found.duplicates >= 2, `${who.bankId} at ${isoDay(now)}: ${found.duplicates} duplicates`);
      t.ok(found.reversals >= 1, `${who.bankId} at ${isoDay(now)}: ${found.reversals} reversal pairs`);
    }
});

t.test('referenceIds are unique on every other account', async (t) => {
  const connector = createSandboxConnector();
  for (const who of HOLDERS) {
    const session = await login(connector, who);
    for (const account of await connector.listAccounts(session, NOW)) {
      if (account.ref.startsWith('CC-')) continue;
      const rows = await connector.listMovements(session, account, { from: NOW - 89 * DAY, to: NOW }, NOW);
      t.equal(new Set(rows.map((r) => r.referenceId)).size, rows.length, `${account.name}`);
      t.equal(new Set(rows.map((r) => r.ref)).size, rows.length, `${account.name} refs`);
    }
  }
});

t.test('amounts are integers and dates line up', async (t) => {
  const connector = createSandboxConnector();
  for (const who of HOLDERS) {
    const session = await login(connector, { ...who, successes: 0 });
    const laterSession = await login(connector, { ...who, successes: 2 });
    const accounts = [
      ...(await connector.listAccounts(session, NOW)),
      byRefPrefix(await connector.listAccounts(laterSession, NOW), 'AV'),
    ];
    for (const account of accounts) {
      const rows = await connector.listMovements(session, account, { from: NOW - 90 * DAY, to: NOW }, NOW);
      t.ok(rows.length > 0, `${account.name} has rows`);
      let bad = 0;
      for (const row of rows) {
        const postedDay = isoDay(row.postedAt);
        const cardPosted = row.type === 'card_purchase' && account.type === 'credit_card' && !row.pending;
        const expected = cardPosted ? isoDay(row.postedAt - 2 * DAY) : postedDay;
        if (
          !Number.isInteger(row.amount) ||
          row.amount === 0 ||
          !/^\d{4}-\d{2}-\d{2}$/.test(row.transactionDate) ||
          row.transactionDate !== expected ||
          row.currency !== account.currency ||
          typeof row.description !== 'string' ||
          !row.description
        )
          bad++;
      }
      t.equal(bad, 0, `${account.name}: ${rows.length} well-formed rows`);
    }
  }
  const usd = byRefPrefix(await accountsOf(connector, { rut: '55555555-5' }), 'CD');
  const session = await login(connector, { rut: '55555555-5' });
  const rows = await connector.listMovements(session, usd, { from: NOW - 90 * DAY, to: NOW }, NOW);
  t.ok(
    rows.some((row) => row.amount % 100 !== 0),
    'USD amounts are cents, not whole dollars',
  );
});

t.test('balances move by exactly the posted movements', async (t) => {
  const connector = createSandboxConnector();
  for (const who of HOLDERS) {
    const session = await login(connector, who);
    const t1 = NOW - 20 * DAY + 3_600_000;
    const t2 = NOW + 17 * DAY;
    const before = await connector.listAccounts(session, t1);
    const after = await connector.listAccounts(session, t2);
    for (const account of before) {
      const later = after.find((a) => a.ref === account.ref);
      if (!later) throw new Error('account vanished');
      const rows = await connector.listMovements(session, account, { from: t1, to: t2 }, t2);
      const seen = new Set<string>();
      let sum = 0;
      for (const row of rows) {
        const key = `${row.referenceId}|${row.amount}|${row.description}|${row.postedAt}`;
        if (row.pending || seen.has(key)) continue;
        seen.add(key);
        sum += row.amount;
      }
      if (account.type === 'credit_card') {
        t.equal(
          account.balance.current! - later.balance.current!,
          sum,
          `${account.name}: owed grows with charges`,
        );
        t.ok((account.balance.limit ?? 0) > account.balance.current!, 'below the limit');
        t.ok(
          account.balance.available! <= (account.balance.limit ?? 0) - account.balance.current!,
          'pending charges hold credit',
        );
      } else {
        t.equal(
          later.balance.current! - account.balance.current!,
          sum,
          `${account.name}: ${account.balance.current} + ${sum}`,
        );
        t.equal(account.balance.available, account.balance.current);
        t.ok(account.balance.current! > 0, 'a positive balance');
      }
    }
  }
});

t.test(
  'statements: bci business only, older than 90 days, the same rows as listMovements once gave',
  async (t) => {
    const connector = createSandboxConnector();
    const session = await login(connector, {
      bankId: 'bci',
      holderType: 'business',
      rutEmpresa: '77777777-7',
    });
    const accounts = await connector.listAccounts(session, NOW);
    const statements = connector.statements;
    if (!statements) throw new Error('the sandbox offers statements');
    for (const account of accounts) {
      const from = NOW - 400 * DAY;
      const rows = await statements(session, account, { from, to: NOW }, NOW);
      t.ok(rows.length > 20, `${account.name}: ${rows.length} statement rows`);
      t.ok(
        rows.every((row) => row.postedAt >= from && row.postedAt < NOW - 90 * DAY && !row.pending),
        'all posted, older than 90 days',
      );
      const older = await connector.listMovements(
        session,
        account,
        { from: NOW - 120 * DAY, to: NOW - 91 * DAY },
        NOW,
      );
      t.same(older, [], 'listMovements reaches back 90 days only');
      const then = NOW - 100 * DAY;
      const window = { from: NOW - 150 * DAY, to: then };
      t.same(
        await statements(session, account, window, NOW),
        await connector.listMovements(session, account, window, then + 3 * DAY),
        'a statement repeats what listMovements returned at the time',
      );
    }
    for (const who of [
      { bankId: 'bci', holderType: 'individual' as const },
      { bankId: 'bancochile', holderType: 'business' as const, rutEmpresa: '77777777-7' },
    ]) {
      const other = await login(connector, who);
      const [account] = await connector.listAccounts(other, NOW);
      if (!account) throw new Error('no account');
      await t.rejects(
        statements(other, account, { from: NOW - 400 * DAY, to: NOW }, NOW),
        failsWith('unsupported'),
        `${who.bankId} ${who.holderType}`,
      );
    }
  },
);

t.test('windows outside the history, unknown accounts and bad sessions', async (t) => {
  const connector = createSandboxConnector();
  const session = await login(connector);
  const [account] = await connector.listAccounts(session, NOW);
  if (!account) throw new Error('no account');
  t.same(
    await connector.listMovements(session, account, { from: NOW, to: NOW - DAY }, NOW),
    [],
    'an empty window',
  );
  t.same(
    await connector.listMovements(session, account, { from: NOW + DAY, to: NOW + 9 * DAY }, NOW),
    [],
    'a future window',
  );
  t.same(
    await connector.listMovements(
      session,
      { ...account, ref: 'CC-unknown' },
      { from: NOW - 9 * DAY, to: NOW },
      NOW,
    ),
    [],
  );
  const early = await connector.listAccounts(session, Date.UTC(2019, 5, 1));
  t.ok(early.length > 0, 'before the history starts there are still accounts, at their opening balance');
  await t.rejects(connector.listAccounts({ holderName: 'x', state: { bankId: 'bci' } }, NOW), TypeError);
});
