import { CONSENT_COVERAGES } from '../banks/consent/authorization-details.js';
import { defineListRoute } from '../api/list-route.js';
import type { JsonSchema } from '../api/route.js';
import { bankHealth } from '../banks/health.js';
import {
  DATA_PROFILES,
  PRODUCTS,
  SECURITY_PROFILES,
  consentProfileOf,
  institutionsOf,
  connectionMethod,
  consentReachable,
  offers,
  type Institution,
} from '../banks/institutions.js';
import { registeredBanks } from '../banks/consent/registrations.js';

export const institutionComponents: Record<string, JsonSchema> = {
  Institution: {
    type: 'object',
    required: [
      'object',
      'id',
      'name',
      'country',
      'products',
      'holder_types',
      'availability',
      'status',
      'mode',
      'connection',
      'consent',
    ],
    properties: {
      object: { const: 'institution' },
      id: { type: 'string' },
      name: { type: 'string' },
      country: { type: 'string' },
      products: { type: 'array', items: { enum: PRODUCTS } },
      holder_types: { type: 'array', items: { enum: ['individual', 'business'] } },
      availability: {
        type: 'array',
        items: {
          type: 'object',
          required: ['product', 'holder_type', 'available'],
          properties: {
            product: { enum: PRODUCTS },
            holder_type: { enum: ['individual', 'business'] },
            available: { type: 'boolean' },
          },
        },
      },
      status: {
        enum: ['up', 'degraded', 'down'],
        description: 'From the outcomes of the last hour of syncs with this bank',
      },
      mode: { enum: ['live', 'test'] },
      connection: {
        enum: ['credentials', 'consent'],
        description:
          "How the end user connects this bank in the caller's mode: `credentials` (their bank login, typed in the widget or sent to `POST /v1/links`) or `consent` (the bank's own authorisation page, through the widget only)",
      },
      consent: {
        description:
          'For a consent institution, the standards it speaks and what a consent covers; null otherwise',
        oneOf: [{ type: 'null' }, { $ref: '#/components/schemas/InstitutionConsent' }],
      },
    },
  },
  InstitutionConsent: {
    type: 'object',
    required: ['security_profile', 'data_profiles', 'covers', 'max_duration_months'],
    properties: {
      security_profile: {
        enum: SECURITY_PROFILES,
        description:
          "The authorisation profile: `fapi2-cl` is FAPI 2.0 with PAR, PKCE, mutual TLS and certificate-bound tokens, as the CMF's draft annex asks; `fapi1-br` is Open Finance Brasil's FAPI 1.0 Advanced (PAR, PKCE, `tls_client_auth`, JARM, PS256) with its consents API (a consent created with a `client_credentials` token, authorised with the scope `consent:<consentId>`)",
      },
      data_profiles: {
        type: 'array',
        items: { enum: DATA_PROFILES },
        description:
          "The APIs' shapes: Open Finance Brasil's accounts 2.x and credit cards 2.x (in CLP with RUT holders at a Chilean bank; in BRL with CPF and CNPJ at a Brazilian one), and at a Brazilian bank its consents 3.x and resources 3.x",
      },
      covers: {
        type: 'array',
        items: { enum: CONSENT_COVERAGES },
        description: 'What a consent at this bank can cover',
      },
      max_duration_months: {
        type: 'integer',
        minimum: 1,
        description: 'The longest consent the bank grants (36 months in the draft annex; 12 in Brazil)',
      },
    },
  },
};

/** The `consent` field of an institution that connects by consent: its own profile, or Chile's draft. */
function consentOf(institution: Institution): Record<string, unknown> {
  const profile = consentProfileOf(institution);
  return {
    security_profile: profile.security,
    data_profiles: [...profile.data],
    covers: [...profile.covers],
    max_duration_months: profile.maxDurationMonths,
  };
}

/**
 * Whether the institution can be linked in `mode`: a consent institution when its consent side is
 * reachable (the simulated bank in test mode, a registration in either); a credential one when it has a
 * connector.
 */
function reachable(
  institution: Institution,
  mode: 'live' | 'test',
  registered: boolean,
  hasConnector: boolean,
): boolean {
  return connectionMethod(institution, mode, registered) === 'consent'
    ? consentReachable(institution, mode, registered)
    : hasConnector;
}

export const institutionRoutes = [
  defineListRoute({
    path: '/v1/institutions',
    operationId: 'listInstitutions',
    summary: 'The supported banks, their products and holder types, and their health',
    tag: 'institutions',
    auth: ['secret_key'],
    filters: {
      product: { enum: PRODUCTS },
      holder_type: { enum: ['individual', 'business'] },
      include_unavailable: { type: 'boolean', description: 'Also list combinations not available yet' },
    },
    description: 'Institutions',
    items: { $ref: '#/components/schemas/Institution' },
    async list({ services, principal, query, now }, { offset, limit }) {
      const health = await bankHealth(services.db.reader, principal.mode, now);
      const registered = await registeredBanks(services.db.reader, principal.mode);
      const all = institutionsOf(services.config)
        .map((institution) => {
          const isRegistered = registered.has(institution.id);
          const method = connectionMethod(institution, principal.mode, isRegistered);
          const hasConnector = reachable(
            institution,
            principal.mode,
            isRegistered,
            services.connectors(institution.id, principal.mode) !== null,
          );
          const availability = PRODUCTS.flatMap((product) =>
            (['individual', 'business'] as const).map((holder_type) => ({
              product,
              holder_type,
              available: hasConnector && offers(institution, product, holder_type),
            })),
          ).filter(
            (c) =>
              (query.product === undefined || c.product === query.product) &&
              (query.holder_type === undefined || c.holder_type === query.holder_type) &&
              (c.available || query.include_unavailable === true),
          );
          return {
            object: 'institution' as const,
            id: institution.id,
            name: institution.name,
            country: institution.country,
            products: [...new Set(availability.map((c) => c.product))],
            holder_types: [...new Set(availability.map((c) => c.holder_type))],
            availability,
            status: health.get(institution.id) ?? 'up',
            mode: principal.mode,
            connection: method,
            consent: method === 'consent' ? consentOf(institution) : null,
          };
        })
        .filter((institution) => institution.availability.length > 0);
      return { data: all.slice(offset, offset + limit), total: all.length };
    },
  }),
];
