import t from 'tap';
import {
  appWithTenants,
  createTenant,
  forEachEngine,
  linkBody,
  runSyncs,
  schedulerTick,
  tableCounts,
  eventTypes,
  CONSENT,
  RAISED_LIMITS,
} from '../helpers/harness.js';

const HOUR = 3_600_000;
forEachEngine(t, async (t, engine) => {
  const { app, tenant, other, sk } = await appWithTenants(t, engine);
  const create = (body: unknown, key = sk) => app.request('POST', '/v1/links', { key, body });

  t.test('bad input is a 400 naming the parameter, and writes nothing', async (t) => {
    const cases: [Record<string, unknown>, number, string, string][] = [
      [{ bank_id: 'bancox' }, 400, 'parameter_invalid', 'bank_id'],
      [{ holder_type: 'company' }, 400, 'parameter_invalid', 'holder_type'],
      [
        { credentials: { rut: '11.111.111-2', password: 'sandbox' } },
        400,
        'parameter_invalid',
        'credentials.rut',
      ],
      [{ credentials: { rut: 'abc', password: 'sandbox' } }, 400, 'parameter_invalid', 'credentials.rut'],
      [{ credentials: { rut: '11.111.111-1' } }, 400, 'parameter_missing', 'credentials.password'],
      [{ credentials: { rut: '', password: 'x' } }, 400, 'parameter_invalid', 'credentials.rut'],
      [{ holder_type: 'business' }, 400, 'parameter_missing', 'credentials.rut_empresa'],
      [
        {
          holder_type: 'business',
          credentials: { rut: '11.111.111-1', password: 'sandbox', rut_empresa: '76.086.428-4' },
        },
        400,
        'parameter_invalid',
        'credentials.rut_empresa',
      ],
      [
        { credentials: { rut: '11.111.111-1', password: 'sandbox', rut_empresa: '76.086.428-5' } },
        400,
        'parameter_invalid',
        'credentials.rut_empresa',
      ],
      [{ consent_text_hash: 'not-a-hash' }, 400, 'parameter_invalid', 'consent_text_hash'],
      [
        {
          bank_id: 'scotiabank',
          holder_type: 'business',
          credentials: { rut: '11.111.111-1', password: 'sandbox', rut_empresa: '76.086.428-5' },
        },
        400,
        'parameter_invalid',
        'holder_type',
      ],
      [{ surprise: true }, 400, 'parameter_invalid', 'surprise'],
    ];
    for (const [overrides, status, code, param] of cases) {
      const before = await tableCounts(app.db);
      const response = await create(linkBody(overrides));
      t.equal(response.status, status, JSON.stringify(overrides));
      t.match(response.body, { error: { type: 'invalid_request_error', code, param } });
      t.notOk(response.text.includes('sandbox"'), 'the password is not echoed');
      t.same(await tableCounts(app.db), before, 'nothing was written');
    }
    const noConsent = linkBody();
    delete (noConsent as Record<string, unknown>).consent_version;
    t.match((await create(noConsent)).body, {
      error: { code: 'parameter_missing', param: 'consent_version' },
    });
    const live = await create(linkBody(), tenant.keys.sk_live.secret);
    t.equal(live.status, 400, 'no live connector is configured for the bank');
    t.match(live.body, { error: { code: 'institution_unavailable' } });
    const publishable = await create(linkBody(), tenant.keys.pk_test.secret);
    t.equal(publishable.status, 403);
  });

  t.test(
    'a new link is active, its first sync finds accounts and movements, and the events follow',
    async (t) => {
      const created = await create(linkBody({ external_user_id: 'user-1' }));
      t.equal(created.status, 200);
      const link = created.body;
      t.match(link, {
        object: 'link',
        bank_id: 'bancochile',
        holder_type: 'individual',
        status: 'active',
        paused: false,
        refresh_status: 'queued',
        external_user_id: 'user-1',
        mode: 'test',
        last_synced_at: null,
      });
      t.match(link.id, /^link_[0-9a-f]{16}$/);
      const stored = await app.db.knex('links').where({ id: link.id }).first();
      t.notOk(JSON.stringify(stored).includes('sandbox'), 'the password is stored encrypted');
      t.same(await eventTypes(app, link.id), ['link.created', 'refresh_intent.created']);
      const intentEvent = await app.db
        .knex('events')
        .where({ link_id: link.id, type: 'refresh_intent.created' })
        .first();
      t.equal(JSON.parse(intentEvent.data).refresh_type, 'full');

      t.equal(await runSyncs(app), 1);
      const synced = (await app.request('GET', `/v1/links/${link.id}`, { key: sk })).body;
      t.match(synced, { status: 'active', refresh_status: 'idle', last_error_code: null });
      t.ok(synced.last_synced_at, 'last_synced_at is set');
      t.equal(
        Date.parse(synced.next_sync_at),
        app.clock.now() + 4 * HOUR,
        'the next sync is one interval later',
      );
      t.ok(synced.accounts_count >= 2, 'checking and credit card at least');
      t.ok(synced.new_movements_count > 0, 'the first sync found movements');
      t.ok(synced.holder_name, 'the holder name comes from the bank');
      const accounts = await app.db.knex('accounts').where({ link_id: link.id });
      t.equal(accounts.length, synced.accounts_count);
      const [counted] = await app.db
        .knex('movements')
        .where({ link_id: link.id, status: 'normal' })
        .count({ n: '*' });
      t.equal(Number(counted?.n), synced.new_movements_count);
      const types = await eventTypes(app, link.id);
      t.same(types.slice(0, 2), ['link.created', 'refresh_intent.created']);
      t.equal(types.filter((type) => type === 'account.created').length, accounts.length);
      t.same(types.slice(-2), ['refresh_intent.succeeded', 'link.refreshed']);
      const intent = await app.db.knex('refresh_intents').where({ link_id: link.id }).first();
      t.match(intent, { status: 'succeeded', refresh_type: 'full' });
    },
  );

  t.test(
    'four hours later the scheduler syncs again and finds newer movements; a paused link is skipped',
    async (t) => {
      const active = (await create(linkBody({ credentials: { rut: '22.222.222-2', password: 'sandbox' } })))
        .body;
      const paused = (await create(linkBody({ credentials: { rut: '33.333.333-3', password: 'sandbox' } })))
        .body;
      await runSyncs(app);
      t.equal((await app.request('POST', `/v1/links/${paused.id}/pause`, { key: sk })).body.paused, true);
      const before = await app.db
        .knex('movements')
        .where({ link_id: active.id })
        .max({ latest: 'posted_at' })
        .first();
      const syncedBefore = (await app.db.knex('links').where({ id: paused.id }).first()).sync_attempts;

      app.clock.advance(4 * HOUR + 60_000);
      await schedulerTick(app);
      const after = await app.db.knex('links').where({ id: active.id }).first();
      t.equal(Number(after.last_synced_at), app.clock.now(), 'the active link synced at this tick');
      const latest = await app.db
        .knex('movements')
        .where({ link_id: active.id })
        .max({ latest: 'posted_at' })
        .first();
      t.ok(Number(latest?.latest) >= Number(before?.latest), 'movements up to the new time');
      t.equal(
        (await app.db.knex('links').where({ id: paused.id }).first()).sync_attempts,
        syncedBefore,
        'the paused link was skipped',
      );

      const resumed = await app.request('POST', `/v1/links/${paused.id}/resume`, { key: sk });
      t.equal(resumed.body.paused, false);
      t.equal(Date.parse(resumed.body.next_sync_at), app.clock.now(), 'resume resets next_sync_at');
      app.clock.advance(60_000);
      await schedulerTick(app);
      t.equal(
        (await app.db.knex('links').where({ id: paused.id }).first()).sync_attempts,
        syncedBefore + 1,
        'picked up at the next tick',
      );
    },
  );

  t.test('rejected credentials three times in a row expire the link, with the events in order', async (t) => {
    const link = (
      await create(linkBody({ credentials: { rut: '44.444.444-4', password: 'sandbox-expiring' } }))
    ).body;
    await runSyncs(app);
    t.equal(
      (await app.request('GET', `/v1/links/${link.id}`, { key: sk })).body.status,
      'active',
      'the first sync succeeds',
    );
    for (let i = 1; i <= 3; i++) {
      app.clock.advance(4 * HOUR + 60_000);
      await schedulerTick(app);
      const now = (await app.request('GET', `/v1/links/${link.id}`, { key: sk })).body;
      t.equal(now.last_error_code, 'rejected_credentials');
      t.equal(now.status, i < 3 ? 'active' : 'expired', `after ${i} failure(s)`);
    }
    const expired = (await app.request('GET', `/v1/links/${link.id}`, { key: sk })).body;
    t.ok(expired.expired_at);
    const types = (await eventTypes(app, link.id)).filter((type) => type.startsWith('link.'));
    t.same(types, ['link.created', 'link.refreshed', 'link.expired']);
    const expiredEvent = await app.db
      .knex('events')
      .where({ link_id: link.id, type: 'link.expired' })
      .first();
    t.match(JSON.parse(expiredEvent.data), {
      object: 'link',
      id: link.id,
      status: 'expired',
      last_error_code: 'rejected_credentials',
    });
    const attempts = (await app.db.knex('links').where({ id: link.id }).first()).sync_attempts;
    app.clock.advance(4 * HOUR + 60_000);
    await schedulerTick(app);
    t.equal(
      (await app.db.knex('links').where({ id: link.id }).first()).sync_attempts,
      attempts,
      'an expired link is not scheduled',
    );
  });

  t.test('a bank that is down never expires a link, and the institution shows it', async (t) => {
    const link = (
      await create(
        linkBody({ bank_id: 'itau', credentials: { rut: '55.555.555-5', password: 'sandbox-unavailable' } }),
      )
    ).body;
    await runSyncs(app);
    for (let i = 0; i < 4; i++) {
      app.clock.advance(4 * HOUR + 60_000);
      await schedulerTick(app);
    }
    const after = (await app.request('GET', `/v1/links/${link.id}`, { key: sk })).body;
    t.equal(after.status, 'active');
    t.equal(after.last_error_code, 'bank_unavailable');
    const institutions = (await app.request('GET', '/v1/institutions', { key: sk })).body;
    t.not(institutions.find((i: { id: string }) => i.id === 'itau').status, 'up', 'itau is degraded or down');
    t.equal(institutions.find((i: { id: string }) => i.id === 'bancochile').status, 'up');
  });

  t.test('delete cascades and leaves only the link.deleted event', async (t) => {
    const link = (await create(linkBody({ credentials: { rut: '66.666.666-6', password: 'sandbox' } }))).body;
    await runSyncs(app);
    t.ok(Number((await app.db.knex('movements').where({ link_id: link.id }).count({ n: '*' }))[0]?.n) > 0);
    const deleted = await app.request('DELETE', `/v1/links/${link.id}`, { key: sk });
    t.match(deleted.body, { object: 'link', id: link.id, deleted: true });
    for (const table of [
      'links',
      'accounts',
      'movements',
      'refresh_intents',
      'jobs',
      'widget_tokens',
      'exchange_tokens',
    ]) {
      const column = table === 'links' ? 'id' : 'link_id';
      t.equal(
        Number((await app.db.knex(table).where(column, link.id).count({ n: '*' }))[0]!.n),
        0,
        `no ${table} row left`,
      );
    }
    const event = await app.db.knex('events').where({ link_id: link.id, type: 'link.deleted' }).first();
    t.match(JSON.parse(event.data), { object: 'link', id: link.id, deleted_at: deleted.body.deleted_at });
    t.equal((await app.request('GET', `/v1/links/${link.id}`, { key: sk })).status, 404);
    t.equal(
      (await app.request('DELETE', `/v1/links/${link.id}`, { key: sk })).status,
      404,
      'irreversible, and not twice',
    );
  });

  t.test("lists filter and paginate; another organisation's link is 404, the other mode's 403", async (t) => {
    const fresh = await createTenant(app, { rateLimits: RAISED_LIMITS });
    const key = fresh.keys.sk_test.secret;
    for (const user of ['a', 'b', 'a']) await create(linkBody({ external_user_id: user }), key);
    const all = await app.request('GET', '/v1/links', { key });
    t.equal(all.headers.get('x-total-count'), '3');
    const mine = await app.request('GET', '/v1/links?external_user_id=a&per_page=1', { key });
    t.equal(mine.headers.get('x-total-count'), '2');
    t.equal(mine.body.length, 1);
    t.equal((await app.request('GET', '/v1/links?status=expired', { key })).body.length, 0);
    t.equal((await app.request('GET', '/v1/links?status=gone', { key })).status, 400);
    const id = all.body[0].id;
    for (const [method, path] of [
      ['GET', `/v1/links/${id}`],
      ['POST', `/v1/links/${id}/pause`],
      ['POST', `/v1/links/${id}/resume`],
      ['DELETE', `/v1/links/${id}`],
    ] as const) {
      t.equal(
        (await app.request(method, path, { key: other.keys.sk_test.secret })).status,
        404,
        `${method} ${path} from another organisation`,
      );
      const live = await app.request(method, path, { key: fresh.keys.sk_live.secret });
      t.equal(live.status, 403);
      t.equal(live.body.error.code, 'wrong_mode');
    }
    t.equal((await app.request('GET', '/v1/links', { key: other.keys.sk_test.secret })).body.length, 0);
  });

  t.test('institutions: filters and unavailable combinations', async (t) => {
    const all = (await app.request('GET', '/v1/institutions', { key: sk })).body;
    t.equal(
      all.length,
      13,
      'the eleven credential banks and the two simulated consent banks (Chile, Brazil)',
    );
    const business = (
      await app.request('GET', '/v1/institutions?holder_type=business&product=movements', { key: sk })
    ).body;
    t.notOk(
      business.some((i: { id: string }) => i.id === 'scotiabank'),
      'an unavailable combination is hidden',
    );
    t.ok(business.every((i: { holder_types: string[] }) => i.holder_types.includes('business')));
    const backfill = (await app.request('GET', '/v1/institutions?product=backfill', { key: sk })).body;
    t.same(
      backfill.map((i: { id: string }) => i.id),
      ['bci'],
    );
    const withHidden = (
      await app.request('GET', '/v1/institutions?product=backfill&include_unavailable=true', { key: sk })
    ).body;
    t.equal(withHidden.length, 13);
    t.ok(
      withHidden
        .find((i: { id: string }) => i.id === 'itau')
        .availability.every((c: { available: boolean }) => !c.available),
    );
    const live = (await app.request('GET', '/v1/institutions', { key: tenant.keys.sk_live.secret })).body;
    t.equal(live.length, 0, 'no live connectors are configured here');
    t.equal((await app.request('GET', '/v1/institutions?holder_type=robot', { key: sk })).status, 400);
    void CONSENT;
  });
});
