import t from 'tap';
import {
  actionsOfPermissions,
  brasilPermissions,
  brasilScope,
  consentIdOfScope,
  detailsOfConsent,
  readsIdentification,
} from '../../src/banks/consent/brasil-consents.js';
import { brasil } from '../../src/banks/consent/profiles/brasil.js';
import { chile } from '../../src/banks/consent/profiles/chile.js';
import { availableResources } from '../../src/banks/consent/consent-connector.js';
import { nonceOf } from '../../src/banks/consent/profiles/brasil.js';
import { jarmState } from '../../src/banks/consent/profiles/trip.js';
import { BRASIL_PERMISSIONS } from '../helpers/consent-countries.js';

/*
 * The pure parts of the widget's Brazilian path (src/banks/consent/brasil-consents.ts,
 * src/banks/consent/profiles/brasil.ts): what a consent asks for and what it allows, the consent a token names,
 * the state of a JARM answer, and which resources the sync may read.
 */

t.test('a product asks whole permission groups, always with RESOURCES_READ', async (t) => {
  t.same(
    brasilPermissions(['ReadAccounts', 'ReadBalances', 'ReadTransactions', 'ReadCreditCards']),
    BRASIL_PERMISSIONS,
  );
  t.same(brasilPermissions(['ReadAccounts']), ['ACCOUNTS_READ', 'RESOURCES_READ']);
});

t.test('what a consent allows: an action needs every permission of its group', async (t) => {
  t.same(
    actionsOfPermissions(['ACCOUNTS_READ', 'ACCOUNTS_TRANSACTIONS_READ', 'CREDIT_CARDS_ACCOUNTS_READ']),
    ['ReadAccounts', 'ReadTransactions'],
    'a card group without its limits and transactions reads no card',
  );
  const [detail] = detailsOfConsent({
    consentId: 'urn:bank:1',
    permissions: ['ACCOUNTS_READ', 'RESOURCES_READ'],
    expiresAt: Date.UTC(2027, 10, 28),
  });
  t.same(detail, {
    type: 'Accounts',
    actions: ['ReadAccounts'],
    identifier: 'urn:bank:1',
    validTo: '2027-11-28T00:00:00.000Z',
  });
});

t.test(
  "the holder's name: the identification permission and scope, kept on the link (issue 45)",
  async (t) => {
    t.same(brasilPermissions(['ReadAccounts'], true), [
      'ACCOUNTS_READ',
      'CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ',
      'RESOURCES_READ',
    ]);
    t.equal(
      brasilScope('urn:b:1', true),
      'openid consent:urn:b:1 accounts credit-cards-accounts resources customers',
    );
    t.equal(brasilScope('urn:b:1'), 'openid consent:urn:b:1 accounts credit-cards-accounts resources');
    const granted = detailsOfConsent({
      consentId: 'urn:b:1',
      permissions: ['CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ', 'ACCOUNTS_READ', 'RESOURCES_READ'],
      expiresAt: null,
    });
    t.same(granted, [
      { type: 'Accounts', actions: ['ReadAccounts'], identifier: 'urn:b:1' },
      { type: 'Customers', actions: ['CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ'], identifier: 'urn:b:1' },
    ]);
    t.ok(readsIdentification(granted));
    t.notOk(
      readsIdentification(granted.slice(0, 1)),
      'a consent without it (one made before, or dropped by the bank)',
    );
    t.equal(brasil.holderData('individual'), 'identification');
    t.equal(brasil.holderData('business'), null, "a company's record is not read");
    t.equal(chile.holderData('individual'), 'name');
    t.equal(chile.holderData('business'), null, "the ID token's name is the person who signed in");
  },
);

t.test('the consent a token scope names', async (t) => {
  t.equal(
    consentIdOfScope('openid consent:urn:bancoabierto-br:5f0c accounts resources'),
    'urn:bancoabierto-br:5f0c',
  );
  t.equal(consentIdOfScope('openid accounts'), null);
  t.equal(consentIdOfScope('consent:not-a-urn'), null);
  t.equal(consentIdOfScope(undefined), null);
});

t.test("a JARM answer's state, read only to find the trip", async (t) => {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  t.equal(jarmState(`${part({ alg: 'PS256' })}.${part({ state: 'abc', code: 'x' })}.sig`), 'abc');
  t.equal(jarmState(`${part({ alg: 'PS256' })}.${part({ code: 'x' })}.sig`), undefined, 'no state');
  t.equal(jarmState('not.a-jwt'), undefined);
  t.equal(jarmState(`a.${Buffer.from('{oops').toString('base64url')}.c`), undefined, 'not JSON');
  t.equal(jarmState(undefined), undefined);
  t.not(nonceOf('state-1'), nonceOf('state-2'), 'each trip its own nonce');
  t.equal(nonceOf('state-1'), nonceOf('state-1'), 'the same at the exchange as at the PAR');
});

t.test('the sync reads only AVAILABLE resources, by type', async (t) => {
  const readable = availableResources([
    { resourceId: 'a1', type: 'ACCOUNT', status: 'AVAILABLE' },
    { resourceId: 'a2', type: 'ACCOUNT', status: 'PENDING_AUTHORISATION' },
    { resourceId: 'c1', type: 'CREDIT_CARD_ACCOUNT', status: 'AVAILABLE' },
    { resourceId: 'c2', type: 'CREDIT_CARD_ACCOUNT', status: 'TEMPORARILY_UNAVAILABLE' },
    { resourceId: 'l1', type: 'LOAN', status: 'AVAILABLE' },
    { resourceId: 'a3', type: 'ACCOUNT', status: 'UNAVAILABLE' },
  ]);
  t.same([...readable.accounts], ['a1']);
  t.same([...readable.cards], ['c1']);
  t.same(
    readable.unavailableRefs,
    ['acc-a2', 'card-c2'],
    'resources 3.1.0: a pending co-holder or a block keeps the account; only UNAVAILABLE (closed) removes it',
  );
});
