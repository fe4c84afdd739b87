import { defineRoute, type JsonSchema } from '../api/route.js';
import { defineListRoute } from '../api/list-route.js';
import type { AppServices } from '../api/services.js';
import { CONNECTOR_ERROR_CODES } from '../banks/connector.js';
import { BANK_ID_PATTERN, BUILT_IN_BANK_IDS, institutionsOf } from '../banks/institutions.js';
import { CONSENT_COVERAGES } from '../banks/consent/authorization-details.js';
import { consentView } from './consent/consent-life.js';
import {
  createLink,
  deleteLink,
  getLink,
  listLinks,
  pauseLink,
  resumeLink,
  type LinkPolicy,
  UNREADABLE_CREDENTIALS,
} from './links.js';

const ref = { $ref: '#/components/schemas/Link' };
export const linkParams = {
  type: 'object',
  required: ['linkId'],
  properties: { linkId: { type: 'string', pattern: '^link_[0-9a-f]{16}$' } },
} as const;
const nullableTime = { type: ['string', 'null'], format: 'date-time' };

export function linkPolicy(services: AppServices): LinkPolicy {
  return {
    secrets: services.secrets,
    syncIntervalMs: services.config.scheduler.syncIntervalMinutes * 60_000,
    consentExpiryWarningDays: services.config.links.consentExpiryWarningDays,
    bankAvailable: (bankId, mode) => services.connectors(bankId, mode) !== null,
    institutions: institutionsOf(services.config),
  };
}

export const linkComponents: Record<string, JsonSchema> = {
  Link: {
    type: 'object',
    required: [
      'object',
      'id',
      'bank_id',
      'holder_type',
      'status',
      'paused',
      'refresh_status',
      'created_at',
      'accounts_count',
      'new_movements_count',
      'mode',
      'consent',
    ],
    properties: {
      object: { const: 'link' },
      id: { type: 'string', pattern: '^link_[0-9a-f]{16}$' },
      bank_id: {
        type: 'string',
        pattern: BANK_ID_PATTERN,
        description: 'A bank code of GET /v1/institutions (the built-in banks and those the operator added)',
      },
      holder_type: { enum: ['individual', 'business'] },
      holder_name: { type: ['string', 'null'] },
      status: { enum: ['active', 'expired'] },
      paused: { type: 'boolean' },
      paused_at: nullableTime,
      refresh_status: { enum: ['idle', 'queued', 'in_progress', 'requires_mfa'] },
      created_at: { type: 'string', format: 'date-time' },
      last_synced_at: nullableTime,
      next_sync_at: nullableTime,
      accounts_count: { type: 'integer' },
      new_movements_count: { type: 'integer' },
      last_error_code: {
        type: ['string', 'null'],
        description: `Why the last sync failed, or null: ${[...CONNECTOR_ERROR_CODES, UNREADABLE_CREDENTIALS].join(', ')}. consent_revoked: a consent bank ended the grant, and the link expired at once (docs/links-and-sync.md)`,
      },
      expired_at: nullableTime,
      external_user_id: { type: ['string', 'null'] },
      consent_version: { type: ['string', 'null'] },
      mode: { enum: ['live', 'test'] },
      consent: {
        description:
          'A consent link\'s consent at the bank (docs/open-finance.md, "A consent\'s life"); null for a link that logs in with credentials',
        oneOf: [{ type: 'null' }, { $ref: '#/components/schemas/LinkConsent' }],
      },
    },
  },
  LinkConsent: {
    type: 'object',
    required: ['expires_at', 'status', 'covers'],
    properties: {
      expires_at: {
        ...nullableTime,
        description: 'When the consent ends; null: when the end user revokes it',
      },
      status: {
        enum: ['active', 'expiring', 'expired', 'revoked'],
        description:
          '`active`; `expiring`: it ends within `links.consentExpiryWarningDays` (7 by default); `expired`: it ended, and the link with it (`last_error_code` `consent_expired`); `revoked`: the end user or the bank withdrew it (`consent_revoked`). All but `active` need the end user: a widget token with intent `reconnect` renews it',
      },
      covers: {
        type: 'array',
        items: { enum: CONSENT_COVERAGES },
        description: 'What the end user authorised the appliance to read',
      },
    },
  },
  DeletedLink: {
    type: 'object',
    required: ['object', 'id', 'deleted', 'deleted_at'],
    properties: {
      object: { const: 'link' },
      id: { type: 'string' },
      deleted: { const: true },
      deleted_at: { type: 'string', format: 'date-time' },
    },
  },
};

export const linkRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/links',
    operationId: 'createLink',
    summary: "Connect a bank with the end user's credentials; the first sync starts in the background",
    tag: 'links',
    auth: ['secret_key'],
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['bank_id', 'holder_type', 'credentials', 'consent_version', 'consent_text_hash'],
      properties: {
        bank_id: {
          type: 'string',
          minLength: 1,
          description: `One of ${BUILT_IN_BANK_IDS.join(', ')}, or a bank the operator added (GET /v1/institutions lists them)`,
        },
        holder_type: { enum: ['individual', 'business'] },
        credentials: {
          type: 'object',
          additionalProperties: false,
          required: ['rut', 'password'],
          properties: {
            rut: { type: 'string', minLength: 1, maxLength: 20 },
            password: { type: 'string', minLength: 1, maxLength: 256 },
            rut_empresa: { type: 'string', maxLength: 20, description: 'Required for business holders' },
          },
        },
        external_user_id: { type: 'string', minLength: 1, maxLength: 255 },
        consent_version: { type: 'string', minLength: 1, maxLength: 64 },
        consent_text_hash: {
          type: 'string',
          pattern: '^[0-9a-fA-F]{64}$',
          description: 'SHA-256 (hex) of the consent text the user accepted',
        },
      },
    },
    responses: { 200: { description: 'The new link, active, with its first sync queued', schema: ref } },
    async handler({ services, principal, body, now }) {
      return {
        body: await services.db.transaction((trx) =>
          createLink(trx, principal, body, linkPolicy(services), now),
        ),
      };
    },
  }),
  defineListRoute({
    path: '/v1/links',
    operationId: 'listLinks',
    summary: 'List links, newest first',
    tag: 'links',
    auth: ['secret_key'],
    filters: {
      status: { enum: ['active', 'expired'] },
      external_user_id: { type: 'string', minLength: 1, maxLength: 255 },
    },
    description: 'A page of links',
    items: ref,
    list: ({ services, principal, query, now }, { offset, limit }) =>
      listLinks(services.db.reader, principal, query, offset, limit, consentView(services, now)),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/links/{linkId}',
    operationId: 'getLink',
    summary: "A link's current state",
    tag: 'links',
    auth: ['secret_key'],
    params: linkParams,
    responses: { 200: { description: 'The link', schema: ref } },
    async handler({ services, principal, params, now }) {
      return {
        body: await getLink(services.db.reader, principal, params.linkId, consentView(services, now)),
      };
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/links/{linkId}',
    operationId: 'deleteLink',
    summary: 'Delete a link with its accounts, movements, refresh intents and tokens; irreversible',
    tag: 'links',
    auth: ['secret_key'],
    params: linkParams,
    responses: { 200: { description: 'Deleted', schema: { $ref: '#/components/schemas/DeletedLink' } } },
    async handler({ services, principal, params, now }) {
      return { body: await services.db.transaction((trx) => deleteLink(trx, principal, params.linkId, now)) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/links/{linkId}/pause',
    operationId: 'pauseLink',
    summary: 'Stop the automatic 4-hour sync (on-demand refreshes keep working)',
    tag: 'links',
    auth: ['secret_key'],
    params: linkParams,
    responses: { 200: { description: 'The paused link', schema: ref } },
    async handler({ services, principal, params, now }) {
      return {
        body: await services.db.transaction((trx) =>
          pauseLink(trx, principal, params.linkId, consentView(services, now)),
        ),
      };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/links/{linkId}/resume',
    operationId: 'resumeLink',
    summary: 'Resume the automatic sync; the next scheduler tick picks the link up',
    tag: 'links',
    auth: ['secret_key'],
    params: linkParams,
    responses: { 200: { description: 'The resumed link', schema: ref } },
    async handler({ services, principal, params, now }) {
      return {
        body: await services.db.transaction((trx) =>
          resumeLink(trx, principal, params.linkId, consentView(services, now)),
        ),
      };
    },
  }),
];
