import { defineRoute } from '../api/route.js';
import { consentView } from '../links/consent/consent-life.js';
import { redeemExchangeToken } from './exchange.js';

export const exchangeRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/exchange_tokens/{tokenId}',
    operationId: 'exchangeToken',
    summary:
      "Swap the widget's et_… exchange token for its link, once, within 5 minutes; a connect's link.created follows",
    tag: 'links',
    auth: ['secret_key'],
    params: {
      type: 'object',
      required: ['tokenId'],
      properties: {
        tokenId: {
          type: 'string',
          pattern: '^et_[0-9A-Za-z]{40}$',
          description: 'The exchange token itself, as the widget posted it to onSuccess',
        },
      },
    },
    responses: {
      200: { description: 'The link', schema: { $ref: '#/components/schemas/Link' } },
      409: {
        description: '`exchange_token_consumed` (already exchanged) or `exchange_token_expired`',
        schema: { $ref: '#/components/schemas/Error' },
      },
    },
    async handler({ services, principal, params, now }) {
      return {
        body: await services.db.transaction((trx) =>
          redeemExchangeToken(trx, principal, params.tokenId, consentView(services, now)),
        ),
      };
    },
  }),
];
