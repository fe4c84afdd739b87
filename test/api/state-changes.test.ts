import t from 'tap';
import { refreshAccount, removeAccount } from '../../src/accounts/store.js';
import { IllegalTransitionError } from '../../src/errors/illegal-transition.js';
import { claimJob, completeJob } from '../../src/jobs/jobs.js';
import { expireFailedReconnect, reconnectLink } from '../../src/links/link-states.js';
import { completeIntent, failIntent, startIntent } from '../../src/refresh/intent-states.js';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import { runSyncJob } from '../../src/sync/engine.js';
import { appWithTenant, forEachEngine, linkBody, runSyncs } from '../helpers/harness.js';

/*
 * The owners' state changes on the database: a change the table refuses throws and writes nothing, since
 * each statement is conditional on the states the table allows; a row that is gone is left gone.
 */

const MINUTE = 60_000;

forEachEngine(t, async (t, engine) => {
  const { app, sk } = await appWithTenant(t, engine);
  let rutSeq = 1;
  const newLink = async (password = 'sandbox') => {
    const rut = `${rutSeq}${rutSeq}.${rutSeq}${rutSeq}${rutSeq}.${rutSeq}${rutSeq}${rutSeq}-${rutSeq}`;
    rutSeq += 1;
    const created = await app.request('POST', '/v1/links', {
      key: sk,
      body: linkBody({ credentials: { rut, password } }),
    });
    if (created.status !== 200) throw new Error(created.text);
    await runSyncs(app);
    return created.body.id as string;
  };
  const row = (table: string, id: string) => app.db.knex(table).where({ id }).first();
  const inTrx = <T>(work: (trx: typeof app.db.knex) => Promise<T>) => app.db.transaction(work);

  t.test('a finished intent is neither started nor ended again', async (t) => {
    const link = await newLink();
    const intent = await app.db.knex('refresh_intents').where({ link_id: link }).first();
    t.equal(intent.status, 'succeeded');
    const now = app.clock.now();
    await t.rejects(
      inTrx((trx) => startIntent(trx, intent, now)),
      new IllegalTransitionError('refresh intent', intent.id, 'succeeded', 'start', [
        'created',
        'in_progress',
        'requires_mfa',
      ]),
    );
    await t.rejects(
      inTrx((trx) => failIntent(trx, intent.id, 'bank_unavailable', now)),
      {
        name: 'IllegalTransitionError',
        message: new RegExp(`^refresh intent ${intent.id} is succeeded: "fail"`),
      },
    );
    t.match(await row('refresh_intents', intent.id), { status: 'succeeded', error_code: null });
    await inTrx((trx) =>
      completeIntent(trx, 'ri_0000000000000000', { accountsUpdated: 1, newMovements: 0 }, now),
    );
    t.pass('an intent that is gone (its link deleted) is left gone');
  });

  t.test('a link reconnects only when expired; a failed reconnect leaves an expired one be', async (t) => {
    const link = await newLink();
    const now = app.clock.now();
    const sealed = {
      credentials_encrypted: 'x',
      rut_digest: 'x',
      company_rut_digest: null,
      consent_version: null,
      consent_text_hash: null,
    };
    await t.rejects(
      inTrx((trx) => reconnectLink(trx, link, sealed, now)),
      {
        name: 'IllegalTransitionError',
        message: `link ${link} is active: "reconnect" is allowed only from expired`,
      },
    );
    t.not((await row('links', link)).credentials_encrypted, 'x', 'nothing written');
    await inTrx((trx) => expireFailedReconnect(trx, link, now - MINUTE, now));
    t.match(await row('links', link), { status: 'expired', expired_at: now - MINUTE });
    await inTrx((trx) => expireFailedReconnect(trx, link, now, now));
    t.match(await row('links', link), { status: 'expired', expired_at: now - MINUTE }, 'left as it was');
  });

  t.test('an account is removed once; a job is completed only while its worker holds it', async (t) => {
    const link = await newLink();
    const account = await app.db.knex('accounts').where({ link_id: link }).first();
    const now = app.clock.now();
    await inTrx((trx) => removeAccount(trx, account.id, now));
    await t.rejects(
      inTrx((trx) => removeAccount(trx, account.id, now)),
      {
        name: 'IllegalTransitionError',
        message: `account ${account.id} is removed: "remove" is allowed only from active`,
      },
    );
    await inTrx((trx) =>
      refreshAccount(trx, account.id, {
        name: account.name,
        last_4: account.last_4,
        holder_name: account.holder_name,
        balance_available: 1,
        balance_current: 1,
        balance_limit: null,
        refreshed_at: now,
        updated_at: now,
      }),
    );
    t.match(await row('accounts', account.id), { status: 'active', removed_at: null, balance_current: 1 });
    const job = await app.db.knex('jobs').where({ link_id: link }).first();
    t.equal(job.status, 'succeeded');
    t.equal(await inTrx((trx) => completeJob(trx, job, now)), false, 'a finished job: the lease is gone');
  });

  t.test(
    'a worker that resumes an intent housekeeping has failed meanwhile does not revive it',
    async (t) => {
      const link = await newLink('sandbox-mfa');
      const intent = (await app.request('POST', '/v1/refresh_intents', { key: sk, body: { link_id: link } }))
        .body;
      await runSyncs(app);
      t.equal((await row('refresh_intents', intent.id)).status, 'requires_mfa');
      const answered = await app.request('POST', `/v1/refresh_intents/${intent.id}/mfa`, {
        key: sk,
        body: { code: '123456' },
      });
      t.equal(answered.status, 200);
      // A worker claims the resumed job, then stalls before it starts the intent; the wait runs out.
      const job = await claimJob(app.db, 'stalled', app.clock.now(), 60 * MINUTE);
      t.equal(job?.refresh_intent_id, intent.id);
      app.clock.advance(6 * MINUTE);
      await runHousekeeping(app.services);
      t.match(await row('refresh_intents', intent.id), { status: 'failed', error_code: 'mfa_expired' });
      // Before the table, the start set the failed intent back to in_progress, where it stayed for good.
      await t.rejects(runSyncJob(app.services, job!), {
        name: 'IllegalTransitionError',
        message: `refresh intent ${intent.id} is failed: "start" is allowed only from created, in_progress, requires_mfa`,
      });
      t.match(await row('refresh_intents', intent.id), { status: 'failed', error_code: 'mfa_expired' });
      t.match(await row('links', link), { refresh_status: 'idle' }, 'the start rolled back whole');
    },
  );
});
