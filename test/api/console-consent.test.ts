import t from 'tap';
import { ManualClock } from '../../src/clock/clock.js';
import { consentLink, registerApp, startBank } from '../helpers/consent-bank.js';
import { signedIn } from '../helpers/console.js';
import { createTenant, forEachEngine, linkBody, setTimeLimit, startTestApp } from '../helpers/harness.js';

/*
 * A consent link in the console, as support reads it (issue 31, item 1): the links list marks the link
 * whose consent needs its end user, and the link's page says when the consent ends, in Spanish and English;
 * a credential link and a consent with time left carry no mark.
 */
setTimeLimit(t, 180_000);

const DAY = 86_400_000;

forEachEngine(t, async (t, engine) => {
  const fixture = await startBank(t, engine);
  const app = await startTestApp(t, engine, { clock: new ManualClock(Date.now()) });
  const tenant = await createTenant(app);
  const registration = await registerApp(fixture, app);
  const credential = await app.request('POST', '/v1/links', {
    key: tenant.keys.sk_test.secret,
    body: linkBody(),
  });
  const endsIn = async (days: number) => {
    const ends = new Date(Math.floor((app.clock.now() + days * DAY) / 1000) * 1000).toISOString();
    return (await consentLink(fixture, app, registration, tenant.orgId, '11.111.111-1', undefined, ends))
      .linkId;
  };
  const soon = await endsIn(3);
  const later = await endsIn(90);
  const english = await signedIn(app, 'support', tenant.orgId, `help-${engine}@a.cl`);
  const spanish = await signedIn(app, 'support', tenant.orgId, `ayuda-${engine}@a.cl`, 'es-CL');
  const links = `/console/o/${tenant.orgId}/test/links`;

  /** The list's row of a link, as markup. */
  const rowOf = (page: string, linkId: string) =>
    [...page.matchAll(/<tr\b.*?<\/tr>/gs)].map((m) => m[0]).find((row) => row.includes(linkId)) ?? '';

  const list = await english('GET', links);
  t.equal(list.status, 200);
  t.match(rowOf(list.text, soon), /<span class="badge attention">consent expiring<\/span>/, 'marked');
  t.notMatch(rowOf(list.text, later), /badge attention/, 'a consent with time left is not marked');
  t.notMatch(rowOf(list.text, credential.body.id), /badge/, 'a credential link has no consent badge');
  t.match(
    rowOf((await spanish('GET', links)).text, soon),
    /<span class="badge attention">consentimiento por vencer<\/span>/,
    'in Spanish',
  );

  const page = await english('GET', `${links}/${soon}`);
  t.equal(page.status, 200);
  t.match(page.text, /<span class="badge attention">consent expiring<\/span>/);
  t.match(page.text, /until [A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d\d\s[AP]M/, 'when it ends');
  const pagina = await spanish('GET', `${links}/${soon}`);
  t.match(pagina.text, /hasta el \d\d-\d\d-\d{4} \d\d:\d\d/, 'cuándo termina');
});
