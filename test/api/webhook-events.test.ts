import t from 'tap';
import { EVENT_TYPES } from '../../src/events/catalogue.js';
import { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { createTenant, forEachEngine, startTestApp, RAISED_LIMITS } from '../helpers/harness.js';
import { causeEveryEventType } from '../helpers/every-event.js';
import { independentlyVerified, startReceiver, type Received } from '../helpers/receiver.js';

/**
 * Each type of the catalogue, caused by the flow that causes it, reaches a real HTTP receiver that checks
 * the signature with its own HMAC code.
 */
forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app, { rateLimits: RAISED_LIMITS });
  const sk = tenant.keys.sk_test.secret;
  const receiver = await startReceiver(t);
  const hook = (
    await app.request('POST', '/v1/webhook_endpoints', {
      key: sk,
      body: { url: receiver.url, enabled_events: ['*'] },
    })
  ).body;
  const dispatcher = new Dispatcher(app.services);
  t.teardown(() => dispatcher.close());
  const { healthy, expiring, rejected, mfa, mfaIntent } = await causeEveryEventType(t, app, sk);

  await dispatcher.dispatchDue();
  const emitted: { id: string; type: string; link_id: string }[] = await app.db
    .knex('events')
    .where({ org_id: tenant.orgId })
    .select('id', 'type', 'link_id');
  const byId = new Map<string, Received>(receiver.received.map((r) => [r.event.id, r]));

  t.test('every event emitted reached the receiver, once, signed', async (t) => {
    t.equal(receiver.received.length, emitted.length, `${emitted.length} events, as many deliveries`);
    for (const event of emitted) {
      const got = byId.get(event.id);
      t.ok(got, `${event.type} ${event.id} arrived`);
      if (!got) continue;
      t.equal(
        independentlyVerified(got.body, got.headers['svc-signature'], hook.secret),
        1,
        `${event.type} verifies`,
      );
      t.equal(got.headers['svc-event-id'], event.id);
    }
  });

  t.test('the ten types, each from its flow, with the catalogue data', async (t) => {
    const of = (type: string, linkId: string) =>
      receiver.received.filter(
        (r) => r.event.type === type && (r.event.data.link_id ?? r.event.data.id) === linkId,
      );
    const types = new Set(receiver.received.map((r) => r.event.type));
    // The spec's ten; webhook_endpoint.disabled takes days of failures (webhook-endpoint-disable.test.ts),
    // link.consent_expiring a consent link and a consent bank (consent-life.test.ts).
    const spec = EVENT_TYPES.filter(
      (type) => type !== 'webhook_endpoint.disabled' && type !== 'link.consent_expiring',
    );
    t.same([...types].sort(), [...spec].sort(), 'all ten types arrived');

    t.match(of('link.created', healthy)[0]?.event.data, {
      object: 'link',
      id: healthy,
      bank_id: 'bancochile',
      status: 'active',
      created_at: String,
    });
    t.match(of('refresh_intent.created', healthy)[0]?.event.data, {
      object: 'refresh_intent',
      link_id: healthy,
      status: 'created',
      refresh_type: 'full',
    });
    const accounts = of('account.created', healthy);
    t.ok(accounts.length >= 3, `${accounts.length} account.created`);
    t.match(accounts[0]?.event.data, {
      object: 'account',
      link_id: healthy,
      name: String,
      type: /^(checking|savings|credit_card)$/,
      currency: /^(CLP|USD)$/,
      last_4: /^\d{4}$/,
    });
    t.match(of('refresh_intent.succeeded', healthy)[0]?.event.data, {
      object: 'refresh_intent',
      status: 'succeeded',
      completed_at: String,
      summary: { accounts_updated: Number, new_movements_count: Number },
    });
    const refreshed = of('link.refreshed', healthy);
    // Synced by every scheduler tick until it was deleted: the first sync and five ticks.
    t.equal(refreshed.length, 6, 'one link.refreshed per successful sync');
    t.match(refreshed[0]?.event.data, {
      object: 'link',
      status: 'active',
      last_synced_at: String,
      next_sync_at: String,
      accounts_count: Number,
      new_movements_count: Number,
    });
    t.match(of('account.removed', healthy)[0]?.event.data, {
      object: 'account',
      link_id: healthy,
      status: 'removed',
      removed_at: String,
    });
    t.match(of('link.deleted', healthy)[0]?.event.data, { object: 'link', id: healthy, deleted_at: String });
    t.match(of('link.expired', expiring)[0]?.event.data, {
      object: 'link',
      id: expiring,
      status: 'expired',
      last_error_code: 'rejected_credentials',
      expired_at: String,
    });
    t.match(of('refresh_intent.failed', rejected)[0]?.event.data, {
      object: 'refresh_intent',
      link_id: rejected,
      status: 'failed',
      error_code: 'rejected_credentials',
      completed_at: String,
    });
    t.match(of('refresh_intent.requires_mfa', mfa)[0]?.event.data, {
      object: 'refresh_intent',
      id: mfaIntent,
      link_id: mfa,
      status: 'requires_mfa',
      requires_mfa: { widget_token: new RegExp(`^${mfaIntent}_sec_`), expires_at: String },
    });
  });

  t.test('the deliveries record what happened', async (t) => {
    const deliveries = await app.request(
      'GET',
      `/v1/webhook_deliveries?endpoint_id=${hook.id}&per_page=300`,
      {
        key: sk,
      },
    );
    t.equal(deliveries.body.length, emitted.length);
    t.ok(deliveries.body.every((d: { status: string }) => d.status === 'succeeded'));
  });
});
