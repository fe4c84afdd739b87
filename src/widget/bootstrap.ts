import type { AppServices } from '../api/services.js';
import type { HolderType } from '../banks/connector.js';
import { profileOf } from '../banks/consent/profiles/index.js';
import { registeredBanks } from '../banks/consent/registrations.js';
import { bankHealth } from '../banks/health.js';
import {
  connectionMethod,
  consentProfileOf,
  findInstitution,
  institutionsOf,
  offers,
  type Product,
} from '../banks/institutions.js';
import { countLinksOfUser, findLink } from '../links/store.js';
import { formatRut } from '../rut/rut.js';
import { consentScreenFor } from './consent/consent-flow.js';
import { consentText, redirectUrl, sessionStatus } from './flows.js';
import type { Locale } from '../html/locale.js';
import { CATALOGUES } from './messages.js';
import type { Bootstrap } from './page.js';
import { describeProblem } from './problems.js';
import type { SessionRow } from './sessions.js';
import type { WidgetTokenRow } from './widget-tokens.js';

/*
 * What the page's script starts from (`Bootstrap`, page.ts): a session's page, with the banks it may connect
 * and any connection already under way, or a page that says why the flow cannot start.
 */

/** How often the page asks how its connection is going. */
const POLL_INTERVAL_MS = 1000;

/** The page that says `code` in the person's words instead of the flow: no session, no banks. */
export function errorBootstrap(
  config: AppServices['config'],
  code: string,
  origin: string | null,
  locale: Locale,
  bankId: string | null = null,
): Bootstrap {
  return {
    session: null,
    kind: null,
    opener_origin: origin,
    hosted: false,
    exit_url: null,
    locale,
    messages: CATALOGUES[locale],
    operator: config.widget.name,
    consent: '',
    poll_interval_ms: POLL_INTERVAL_MS,
    banks: [],
    bank_id: bankId,
    holder_type: null,
    username_prefill: null,
    error: describeProblem(
      code,
      {
        tokenTtlMinutes: config.widget.tokenTtlMinutes,
        bankName: bankId ? findInstitution(bankId)?.name : undefined,
      },
      locale,
    ),
    status: null,
  };
}

/**
 * The page of a session: the banks the token may connect (each reachable in the session's mode and offering
 * the token's product), a consent bank's screen, the hosted flow's way out, and where an MFA refresh stands.
 */
export async function sessionBootstrap(
  services: AppServices,
  session: SessionRow,
  secret: string,
  token: WidgetTokenRow | null,
  now: number,
): Promise<Bootstrap> {
  const { config } = services;
  const product: Product = token?.product ?? 'movements';
  const health = await bankHealth(services.db.reader, session.mode, now);
  const registered = await registeredBanks(services.db.reader, session.mode);
  const banks = institutionsOf(services.config).flatMap((bank) => {
    const connection = connectionMethod(bank, session.mode, registered.has(bank.id));
    // A consent bank is offered once the appliance is registered with it; a credential one with a connector.
    const reachable =
      connection === 'consent'
        ? registered.has(bank.id)
        : services.connectors(bank.id, session.mode) !== null;
    const holderTypes = (['individual', 'business'] as HolderType[]).filter((holder) =>
      offers(bank, product, holder),
    );
    if (!reachable || holderTypes.length === 0) return [];
    return [
      {
        id: bank.id,
        name: bank.name,
        status: health.get(bank.id) ?? ('up' as const),
        holder_types: holderTypes,
        connection,
        consent:
          connection === 'consent'
            ? consentScreenFor(product, bank.name, {
                config,
                now,
                locale: session.locale,
                zone: profileOf(consentProfileOf(bank).security).zone,
                // The widget starts with the first holder type offered (widget.js), individual where it is.
                holder: profileOf(consentProfileOf(bank).security).holderData(holderTypes[0]!),
              })
            : null,
        // What the person gives before going to the bank: a Brazilian bank's consent names its customer.
        asks_cpf: connection === 'consent' && profileOf(consentProfileOf(bank).security).asksHolderIds,
      },
    ];
  });
  // Consent banks first: with 11 password banks before them they sat below a phone's fold, unmarked.
  // (A stable sort: each group keeps the institutions' order.)
  banks.sort((a, b) => Number(a.connection !== 'consent') - Number(b.connection !== 'consent'));
  const hosted = session.opener_origin === '';
  const base: Bootstrap = {
    session: secret,
    kind: session.kind,
    opener_origin: hosted ? null : session.opener_origin,
    hosted,
    exit_url:
      hosted && token?.redirect_uri
        ? redirectUrl(token.redirect_uri, { error: 'exited', state: token.state })
        : null,
    locale: session.locale,
    messages: CATALOGUES[session.locale],
    operator: config.widget.name,
    consent: consentText(config.widget.name, session.locale),
    poll_interval_ms: POLL_INTERVAL_MS,
    banks,
    bank_id: session.bank_id,
    holder_type: null,
    username_prefill: token?.username_prefill ? formatRut(token.username_prefill) : null,
    error: null,
    status: null,
  };
  if (session.kind === 'connect' && token?.connection_limit != null && token.external_user_id !== null) {
    const owner = { orgId: session.org_id, mode: session.mode, externalUserId: token.external_user_id };
    if ((await countLinksOfUser(services.db.reader, owner)) >= token.connection_limit)
      base.error = describeProblem(
        'connection_limit_reached',
        { connectionLimit: token.connection_limit },
        session.locale,
      );
  }
  if (session.kind !== 'connect' && session.link_id) {
    const link = await findLink(services.db.reader, session.link_id);
    base.holder_type = link?.holder_type ?? null;
  }
  if (session.kind === 'mfa')
    base.status = await sessionStatus(services.db, session, { now, mfaAttempts: config.refresh.mfaAttempts });
  return base;
}
