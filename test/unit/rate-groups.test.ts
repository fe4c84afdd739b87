import t from 'tap';
import { rateGroupFor } from '../../src/ratelimit/groups.js';

t.test('every GET is in the read group', async (t) => {
  for (const path of [
    '/v1/links/{linkId}',
    '/v1/accounts',
    '/v1/accounts/{accountId}/movements',
    '/v1/institutions',
  ])
    t.equal(rateGroupFor('get', path), 'read', `GET ${path}`);
  t.equal(rateGroupFor('GET', '/v1/openapi.json'), 'read', 'the method is case-insensitive');
});

t.test('reading webhook deliveries has its own group', async (t) => {
  t.equal(rateGroupFor('get', '/v1/webhook_deliveries'), 'webhook_deliveries');
  t.equal(rateGroupFor('get', '/v1/webhook_deliveries/{id}'), 'webhook_deliveries');
  t.equal(
    rateGroupFor('post', '/v1/webhook_deliveries/{id}/redeliver'),
    'resource_write',
    'redelivering is a write, not a read of deliveries',
  );
});

t.test('creating a refresh intent is a sync write', async (t) => {
  t.equal(rateGroupFor('post', '/v1/refresh_intents'), 'sync_write');
  t.equal(rateGroupFor('get', '/v1/refresh_intents/{intentId}'), 'read', 'reading one is a read');
});

t.test('creating a widget token has its own group', async (t) => {
  t.equal(rateGroupFor('post', '/v1/widget_tokens'), 'widget_tokens');
});

t.test('pause, resume, delete and other writes are resource writes', async (t) => {
  t.equal(rateGroupFor('post', '/v1/links/{linkId}/pause'), 'resource_write');
  t.equal(rateGroupFor('post', '/v1/links/{linkId}/resume'), 'resource_write');
  t.equal(rateGroupFor('delete', '/v1/links/{linkId}'), 'resource_write');
  t.equal(rateGroupFor('post', '/v1/links'), 'resource_write');
  t.equal(rateGroupFor('patch', '/v1/webhook_endpoints/{id}'), 'resource_write');
});
