/* eslint-disable @typescript-eslint/no-explicit-any -- the files' schemas checked the bodies first */
import type { Context } from 'koa';
import { normaliseCnpj, normaliseCpf } from '../../cpf/cpf.js';
import type { Caller, OperationHandler, ProviderContext, ResourceRequest } from '../bank-profile.js';
import { errorAnswer, type Answer, type MatchedOperation } from '../resource-server.js';
import { resourceAnswers } from '../resources.js';
import { bearerToken, challenge, hasScope } from '../tokens.js';
import {
  consentData,
  createConsent,
  extend,
  extensionsData,
  isRefusal,
  parseZulu,
  revoke,
  zulu,
  type ConsentRecord,
  type Permission,
  type Refusal,
} from './consents.js';
import { BANK_CNPJ, BRASIL_MARKET, findBrasilUser } from './market.js';
import { personalIdentification } from './customers.js';
import { BRASIL_BANK_NAME } from './pages.js';
import { CONSENT_NAMESPACE, consentIdOfScope } from './consent-ids.js';

/*
 * The Brazilian bank's APIs, one handler per operation of the files (the resource server routed and checked
 * the request first): consents 3.3.1 with a `client_credentials` token of scope `consents`, extensions with an
 * authorization-code token of the consent, and the data files (and customers 2.2.1's personal identifications,
 * customers.ts) with a token of an authorised consent.
 */

export const CONSENTS_BASE = '/open-banking/consents/v3';
export const RESOURCES_BASE = '/open-banking/resources/v3';

type Consents = {
  load(consentId: string): Promise<ConsentRecord | null>;
  save(record: ConsentRecord): Promise<void>;
};

const CLIENT_CREDENTIALS_OPERATIONS = new Set([
  'consentsPostConsents',
  'consentsGetConsentsConsentId',
  'consentsDeleteConsentsConsentId',
]);

/** The token a call carries, of the kind its operation takes; for the data files, of an authorised consent. */
export async function brasilAuthorize(
  context: ProviderContext,
  consents: Consents,
  ctx: Context,
  operation: MatchedOperation,
): Promise<Caller | Answer> {
  const now = context.clock.now();
  const refuse = (description: string): Answer =>
    errorAnswer(401, 'UNAUTHORIZED', description, now, {
      'WWW-Authenticate': challenge('invalid_token', description),
    });
  const clientCredentials = CLIENT_CREDENTIALS_OPERATIONS.has(operation.operationId);
  const bearer = await bearerToken(ctx, context, clientCredentials ? 'ClientCredentials' : 'AccessToken');
  if ('status' in bearer) return refuse(bearer.description);
  const { token } = bearer;
  if (bearer.token['x5t#S256'] === undefined) return refuse('The access token is not bound to a certificate');
  if (clientCredentials || operation.file === 'consents-3.3.1')
    return { customer: '', faultsOf: token.clientId, token };
  const consentId = consentIdOfScope(token.scope);
  const record = consentId ? await consents.load(consentId) : null;
  if (!record || record.status !== 'AUTHORISED')
    return refuse('The consent is not authorised (revoked, rejected or expired)');
  const user = findBrasilUser(record.cpf);
  if (!user) return errorAnswer(403, 'FORBIDDEN', 'No such customer', now);
  return { customer: user.dataRut, faultsOf: record.cpf, token, consent: record };
}

function consentsHandlers(context: ProviderContext, consents: Consents): Record<string, OperationHandler> {
  const { log, mtlsBase } = context;
  const selfOf = (consentId: string, tail = '') =>
    `${mtlsBase}${CONSENTS_BASE}/consents/${encodeURIComponent(consentId)}${tail}`;
  const refused = (refusal: Refusal, now: number) =>
    errorAnswer(refusal.status, refusal.code, refusal.detail, now);
  /** The consent the path names, of the caller's client. */
  const owned = async (r: ResourceRequest) => {
    const consentId = r.operation.params.consentId!;
    const record = /^urn:/.test(consentId) ? await consents.load(consentId) : null;
    return record && record.clientId === r.caller.token.clientId ? record : null;
  };
  const notFound = (now: number) =>
    errorAnswer(404, 'NOT_FOUND', 'No consent of this client has that id', now);
  /** Extensions: an authorization_code token of this very consent. */
  const ofConsent = async (r: ResourceRequest): Promise<{ record: ConsentRecord } | { refusal: Answer }> => {
    const record = await owned(r);
    if (!record) return { refusal: notFound(r.now) };
    if (consentIdOfScope(r.caller.token.scope) !== record.consentId)
      return { refusal: errorAnswer(403, 'FORBIDDEN', 'The token is not of this consent', r.now) };
    return { record };
  };
  return {
    async consentsPostConsents(r) {
      if (!hasScope(r.caller.token, 'consents'))
        return errorAnswer(403, 'FORBIDDEN', 'The token lacks the consents scope', r.now);
      const data = (r.body as { data: any }).data;
      const cpf = normaliseCpf(String(data.loggedUser.document.identification));
      if (data.loggedUser.document.rel !== 'CPF' || !cpf)
        return errorAnswer(
          400,
          'PARAMETRO_INVALIDO',
          'loggedUser.document must be a valid CPF (rel CPF)',
          r.now,
        );
      let cnpj: string | null = null;
      if (data.businessEntity) {
        cnpj = normaliseCnpj(String(data.businessEntity.document?.identification ?? ''));
        if (!cnpj)
          return errorAnswer(
            400,
            'PARAMETRO_INVALIDO',
            'businessEntity.document must be a valid CNPJ',
            r.now,
          );
      }
      const expiration = data.expirationDateTime === undefined ? null : parseZulu(data.expirationDateTime);
      if (data.expirationDateTime !== undefined && expiration === null)
        return errorAnswer(400, 'PARAMETRO_INVALIDO', 'expirationDateTime is not a date-time', r.now);
      const input = {
        clientId: r.caller.token.clientId,
        cpf,
        cnpj,
        permissions: data.permissions,
        expirationDateTime: expiration,
      };
      const created = createConsent(input, r.now, CONSENT_NAMESPACE);
      if (isRefusal(created)) return refused(created, r.now);
      await consents.save(created);
      log.info({ client: input.clientId }, 'consent bank (Brazil): consent created');
      return {
        status: 201,
        body: {
          data: consentData(created, false),
          links: { self: selfOf(created.consentId) },
          meta: { requestDateTime: zulu(r.now) },
        },
      };
    },
    async consentsGetConsentsConsentId(r) {
      const record = await owned(r);
      if (!record) return notFound(r.now);
      return {
        status: 200,
        body: {
          data: consentData(record, true),
          links: { self: selfOf(record.consentId) },
          meta: { requestDateTime: zulu(r.now) },
        },
      };
    },
    async consentsDeleteConsentsConsentId(r) {
      const record = await owned(r);
      if (!record) return notFound(r.now);
      const revoked = revoke(record, r.now);
      if (isRefusal(revoked)) return refused(revoked, r.now);
      await consents.save(revoked);
      log.info({ client: record.clientId }, 'consent bank (Brazil): consent revoked');
      return { status: 204 };
    },
    async consentsGetConsentsConsentIdExtensions(r) {
      const found = await ofConsent(r);
      if ('refusal' in found) return found.refusal;
      const { record } = found;
      const data = extensionsData(record);
      return {
        status: 200,
        body: {
          data,
          links: { self: selfOf(record.consentId, '/extensions') },
          meta: { totalRecords: data.length, totalPages: 1, requestDateTime: zulu(r.now) },
        },
      };
    },
    async consentsPostConsentsConsentIdExtends(r) {
      const found = await ofConsent(r);
      if ('refusal' in found) return found.refusal;
      const { record } = found;
      const data = (r.body as { data: any }).data;
      const expiration = data.expirationDateTime === undefined ? null : parseZulu(data.expirationDateTime);
      if (data.expirationDateTime !== undefined && expiration === null)
        return errorAnswer(400, 'PARAMETRO_INVALIDO', 'expirationDateTime is not a date-time', r.now);
      const extended = extend(
        record,
        {
          cpf: normaliseCpf(String(data.loggedUser.document.identification)) ?? '',
          expirationDateTime: expiration,
          ipAddress: r.ctx.get('x-fapi-customer-ip-address'),
          userAgent: r.ctx.get('x-customer-user-agent'),
        },
        r.now,
      );
      if (isRefusal(extended)) return refused(extended, r.now);
      await consents.save(extended);
      return {
        status: 201,
        body: {
          data: consentData(extended, false),
          links: { self: selfOf(record.consentId) },
          meta: { requestDateTime: zulu(r.now) },
        },
      };
    },
  };
}

function dataHandlers(context: ProviderContext): Record<string, OperationHandler> {
  const answers = resourceAnswers(context.data, BRASIL_MARKET);
  /** The consent's permission and the token's scope, or 403. */
  const needs =
    (permission: Permission, scope: string, handler: OperationHandler): OperationHandler =>
    (r) => {
      const record = r.caller.consent as ConsentRecord;
      return record.permissions.includes(permission) && hasScope(r.caller.token, scope)
        ? handler(r)
        : errorAnswer(403, 'FORBIDDEN', `The consent does not cover ${permission}`, r.now);
    };
  const ok = (body: unknown): Answer => ({ status: 200, body });
  const noAccount = (now: number) => errorAnswer(404, 'NOT_FOUND', 'No such account', now);
  const deposit = (r: ResourceRequest) =>
    answers.findDeposit(r.caller.customer, r.operation.params.accountId!, r.at);
  const card = (r: ResourceRequest) =>
    answers.findCard(r.caller.customer, r.operation.params.creditCardAccountId!, r.at);
  return {
    customersGetPersonalIdentifications: needs(
      'CUSTOMERS_PERSONAL_IDENTIFICATIONS_READ',
      'customers',
      (r) => {
        const record = r.caller.consent as ConsentRecord;
        const name = context.data.name(r.caller.customer);
        if (name === null) return errorAnswer(404, 'NOT_FOUND', 'No identification record', r.now);
        return ok(
          personalIdentification({
            cpf: record.cpf,
            name,
            bankName: BRASIL_BANK_NAME,
            bankCnpj: BANK_CNPJ,
            self: r.self,
            now: r.now,
          }),
        );
      },
    ),
    resourcesGetResources: needs('RESOURCES_READ', 'resources', (r) => {
      const record = r.caller.consent as ConsentRecord;
      const all = [
        ...(record.permissions.includes('ACCOUNTS_READ') ? answers.deposits(r.caller.customer, r.at) : []),
        ...(record.permissions.includes('CREDIT_CARDS_ACCOUNTS_READ')
          ? answers.cards(r.caller.customer, r.at)
          : []),
      ].map((account) => ({
        resourceId: account.id,
        type: account.product === 'credit_card' ? 'CREDIT_CARD_ACCOUNT' : 'ACCOUNT',
        status: 'AVAILABLE',
      }));
      const { page, pageSize } = r.paging;
      return ok({
        data: all.slice((page - 1) * pageSize, page * pageSize),
        links: { self: r.self.href },
        meta: {
          totalRecords: all.length,
          totalPages: Math.max(1, Math.ceil(all.length / pageSize)),
          requestDateTime: zulu(r.now),
        },
      });
    }),
    accountsGetAccounts: needs('ACCOUNTS_READ', 'accounts', (r) =>
      ok(answers.accountsList(r.caller.customer, r.operation.query.accountType, r.self, r.paging, r.at)),
    ),
    accountsGetAccountsAccountId: needs('ACCOUNTS_READ', 'accounts', (r) => {
      const account = deposit(r);
      return account ? ok(answers.accountIdentification(account, r.self, r.now)) : noAccount(r.now);
    }),
    accountsGetAccountsAccountIdBalances: needs('ACCOUNTS_BALANCES_READ', 'accounts', (r) => {
      const account = deposit(r);
      return account
        ? ok(answers.accountBalances(r.caller.customer, account, r.self, r.now))
        : noAccount(r.now);
    }),
    accountsGetAccountsAccountIdTransactions: needs('ACCOUNTS_TRANSACTIONS_READ', 'accounts', (r) => {
      const account = deposit(r);
      if (!account) return noAccount(r.now);
      const window = r.window();
      if ('status' in window) return window;
      const filter = { creditDebitIndicator: r.operation.query.creditDebitIndicator };
      return ok(
        answers.accountTransactions(r.caller.customer, account, window, filter, r.self, r.paging, r.at),
      );
    }),
    creditCardsGetAccounts: needs('CREDIT_CARDS_ACCOUNTS_READ', 'credit-cards-accounts', (r) =>
      ok(answers.cardAccountsList(r.caller.customer, r.self, r.paging, r.at)),
    ),
    creditCardsGetAccountsCreditCardAccountId: needs(
      'CREDIT_CARDS_ACCOUNTS_READ',
      'credit-cards-accounts',
      (r) => {
        const account = card(r);
        return account ? ok(answers.cardIdentification(account, r.self, r.now)) : noAccount(r.now);
      },
    ),
    creditCardsGetAccountsCreditCardAccountIdLimits: needs(
      'CREDIT_CARDS_ACCOUNTS_LIMITS_READ',
      'credit-cards-accounts',
      (r) => {
        const account = card(r);
        return account ? ok(answers.cardLimits(r.caller.customer, account, r.self, r.now)) : noAccount(r.now);
      },
    ),
    creditCardsGetAccountsCreditCardAccountIdTransactions: needs(
      'CREDIT_CARDS_ACCOUNTS_TRANSACTIONS_READ',
      'credit-cards-accounts',
      (r) => {
        const account = card(r);
        if (!account) return noAccount(r.now);
        const window = r.window();
        if ('status' in window) return window;
        const { transactionType, payeeMCC } = r.operation.query;
        return ok(
          answers.cardTransactions(
            r.caller.customer,
            account,
            window,
            { transactionType, payeeMCC },
            r.self,
            r.paging,
            r.at,
          ),
        );
      },
    ),
  };
}

export function brasilApiHandlers(
  context: ProviderContext,
  consents: Consents,
): Record<string, OperationHandler> {
  return { ...consentsHandlers(context, consents), ...dataHandlers(context) };
}
