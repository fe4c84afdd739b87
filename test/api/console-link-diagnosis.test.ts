import t from 'tap';
import { signedIn } from '../helpers/console.js';
import { createTenant, forEachEngine, linkBody, runSyncs, startTestApp } from '../helpers/harness.js';

/*
 * "Why is this link stale?" in the console, in support's language (issue 18): the diagnosis `svc links
 * inspect` gives, worded in Spanish or English and pointing at the page's own buttons rather than the CLI,
 * with the tables' columns and states translated.
 */

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app);
  const created = await app.request('POST', '/v1/links', {
    key: tenant.keys.sk_test.secret,
    body: linkBody(),
  });
  const linkId = created.body.id as string;
  const path = `/console/o/${tenant.orgId}/test/links/${linkId}`;
  const english = await signedIn(app, 'support', tenant.orgId, `help-${engine}@a.cl`);
  const spanish = await signedIn(app, 'support', tenant.orgId, `ayuda-${engine}@a.cl`, 'es-CL');
  /** The diagnosis's items as a person reads them. */
  const diagnosis = async (as: typeof english) => {
    const page = await as('GET', path);
    t.equal(page.status, 200);
    const list = /<ul class="diagnosis">(.*?)<\/ul>/s.exec(page.text)?.[1] ?? '';
    return [...list.matchAll(/<li>(.*?)<\/li>/gs)].map((match) => match[1]!);
  };

  t.same(
    await diagnosis(english),
    [
      'A sync is queued. If it does not move, ask the operator to check the scheduler (svc status).',
      'It has never synced successfully.',
    ],
    'a new link: queued and never synced',
  );
  t.same(
    await diagnosis(spanish),
    [
      'Hay una sincronización en cola. Si no avanza, pide a quien opera el servidor revisar el programador (svc status).',
      'Nunca se ha sincronizado con éxito.',
    ],
    'the same in Spanish',
  );

  await runSyncs(app);
  const [healthy] = await diagnosis(english);
  t.match(healthy, /^Healthy: last synced Jun 15, 2026, 11:00\sAM, next sync Jun 15, 2026, 3:00\sPM\.$/);
  t.match(
    (await diagnosis(spanish))[0],
    /^Sana: última sincronización 15-06-2026 11:00, próxima 15-06-2026 15:00\.$/,
  );

  // The newest confirmed movements of the link's accounts, ten at most, newest first.
  const newest = await app.db
    .knex('movements')
    .where({ link_id: linkId, status: 'normal', pending: false })
    .orderBy([
      { column: 'posted_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .limit(10)
    .select('description', 'amount');
  t.ok(newest.length === 10, 'the sandbox synced more than a page of movements');
  const shown = /<h2>Recent movements \(confirmed\)<\/h2>.*?<tbody>(.*?)<\/tbody>/s.exec(
    (await english('GET', path)).text,
  )?.[1];
  const rows = [...(shown ?? '').matchAll(/<tr>(.*?)<\/tr>/gs)].map((row) =>
    [...row[1]!.matchAll(/<td[^>]*>(.*?)<\/td>/gs)].map((cell) => cell[1]!),
  );
  t.same(
    rows.map((cells) => [cells[2]!.replace(/^<span translate="no">(.*)<\/span>$/s, '$1'), cells[3]]),
    newest.map((m: { description: string; amount: number }) => [
      m.description,
      new Intl.NumberFormat('en-US', { style: 'currency', currency: 'CLP' }).format(m.amount),
    ]),
    'the page lists them, newest first, with their amounts as money (CLP has no minor unit)',
  );

  t.equal((await english('POST', `${path}/pause`)).status, 200, 'paused from the console');
  const reloaded = await english('GET', `${path}/pause`);
  t.equal(reloaded.status, 303, "the action's address opened again (a reload) leads back to the link");
  t.equal(reloaded.location, path);
  t.match(await diagnosis(english), [
    /^Paused since Jun 15, 2026, 11:00\sAM: the scheduler skips it\. Use Resume/,
  ]);
  t.notMatch(
    (await diagnosis(english))[0],
    /svc links resume/,
    'support is pointed at the button, not the CLI',
  );
  t.match(await diagnosis(spanish), [/^En pausa desde el 15-06-2026 11:00: .*Usa «Reanudar»/]);

  await app.db.knex('links').where({ id: linkId }).update({
    status: 'expired',
    expired_at: app.clock.now(),
    consecutive_failures: 3,
    last_error_code: 'invalid_credentials',
  });
  t.match(await diagnosis(spanish), [
    /^Expiró el \d\d-\d\d-\d{4} \d\d:\d\d después de 3 inicios de sesión fallidos \(invalid_credentials\)/,
    /^En pausa/,
  ]);

  const page = (await spanish('GET', path)).text;
  for (const word of ['Movimientos', 'Intentos', 'Último error', 'expirada', 'exitosa'])
    t.ok(page.includes(word), `the Spanish page says "${word}"`);
  const list = (await spanish('GET', `/console/o/${tenant.orgId}/test/links?status=expired`)).text;
  t.match(list, /<option value="expired" selected>expirada<\/option>/, 'the status filter in Spanish');
  t.ok(list.includes(linkId), 'finds the expired link');

  // The bank's own words under the finding (issue 41 item 2), escaped, and a grant still being revoked.
  await app.db.knex('links').where({ id: linkId }).update({
    status: 'active',
    paused: false,
    expired_at: null,
    consecutive_failures: 0,
    last_error_code: 'bank_unavailable',
  });
  const job = await app.db.knex('jobs').where({ link_id: linkId }).orderBy('created_at', 'desc').first();
  await app.db.knex('jobs').where({ id: job.id }).update({
    status: 'failed',
    last_error:
      'bank_unavailable: the bank answered the accounts list with HTTP 503 temporarily_unavailable: <b>maintenance</b> until 10:00',
  });
  await app.db.knex('grant_revocations').insert({
    id: 'grev_diagnosis',
    link_id: linkId,
    org_id: tenant.orgId,
    mode: 'test',
    bank_id: 'bancoabierto',
    client_id: 'client-1',
    grant_id_sealed: 'sealed',
    status: 'pending',
    attempts: 2,
    next_attempt_at: app.clock.now() + 60_000,
    locked_until: null,
    last_error: 'the bank answered HTTP 429 slow_down',
    created_at: app.clock.now(),
    updated_at: app.clock.now(),
    revoked_at: null,
  });
  const items = await diagnosis(english);
  t.match(
    items,
    [
      /^The last sync failed with bank_unavailable .*<small class="bank-said">The bank said: the bank answered the accounts list with HTTP 503 temporarily_unavailable: &lt;b&gt;maintenance&lt;\/b&gt; until 10:00<\/small>$/s,
      /^A consent of this link \(replaced or refused\) is being revoked at the bank: next attempt at .*The bank said: the bank answered HTTP 429 slow_down/s,
    ],
    "the bank's words, escaped, under its finding; the pending revocation with its last error",
  );
  t.match((await diagnosis(spanish))[1], /^Un consentimiento de esta conexión .*El banco respondió:/s);
});
