import { randomBytes } from 'node:crypto';
import t from 'tap';
import { rutDigestsOf, rutSearchDigests } from '../../src/links/rut-search.js';
import { formatRut, rutCheckDigit } from '../../src/rut/rut.js';
import { runHousekeeping } from '../../src/scheduler/housekeeping.js';
import { SecretBox } from '../../src/secrets/secret-box.js';
import { signedIn } from '../helpers/console.js';
import { createTenant, forEachEngine, linkBody, startTestApp } from '../helpers/harness.js';

/*
 * Support finds a link by its holder's RUT in the console (issue 18), written any way a person writes it,
 * though the RUT is stored only sealed: links keep a keyed digest of it, and housekeeping digests the links
 * made before the digests existed.
 */

const rut = (body: string) => `${body}-${rutCheckDigit(body)}`;
const PERSON = rut('12345678');
const COMPANY = rut('76543210');
const OWNER = rut('9876543');

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const a = await createTenant(app);
  const b = await createTenant(app);
  const create = async (key: string, body: Record<string, unknown>) => {
    const created = await app.request('POST', '/v1/links', { key, body: linkBody(body) });
    t.equal(created.status, 200, 'created');
    return created.body.id as string;
  };
  const mine = await create(a.keys.sk_test.secret, {
    credentials: { rut: formatRut(PERSON), password: 'sandbox' },
  });
  const business = await create(a.keys.sk_test.secret, {
    holder_type: 'business',
    credentials: { rut: OWNER, rut_empresa: formatRut(COMPANY), password: 'sandbox' },
  });
  const theirs = await create(b.keys.sk_test.secret, { credentials: { rut: PERSON, password: 'sandbox' } });
  const admin = await signedIn(app, 'admin', a.orgId, `admin-${engine}@a.cl`);
  /** The links a search in A's console lists. */
  const found = async (query: string, mode = 'test') => {
    const page = await admin('GET', `/console/o/${a.orgId}/${mode}/links?q=${encodeURIComponent(query)}`);
    t.equal(page.status, 200);
    return [...new Set(page.text.match(/link_[0-9a-f]{16}/g) ?? [])];
  };

  t.same(await found(formatRut(PERSON)), [mine], 'found by the RUT with dots and hyphen');
  t.same(await found(PERSON.replace('-', '')), [mine], 'and by its bare digits; never the other tenant’s');
  t.same(await found(` ${PERSON.toLowerCase()} `), [mine], 'spaces around it do not matter');
  t.same(await found(COMPANY), [business], "a business link by the company's RUT");
  t.same(await found(formatRut(OWNER)), [business], "and by its owner's");
  t.same(await found(rut('11222333')), [], 'a RUT nobody connected finds nothing');
  t.same(await found(PERSON, 'live'), [], 'and the live mode has none of the test links');
  t.notOk(theirs === mine, 'two links');

  const stored = JSON.stringify(await app.db.knex('links').select());
  for (const value of [PERSON, COMPANY, OWNER])
    t.notOk(stored.includes(value.split('-')[0]!), `no column holds ${value} in the clear`);

  await t.test('links made before the digests are found once housekeeping digests them', async (t) => {
    await app.db.knex('links').update({ rut_digest: null, company_rut_digest: null });
    t.same(await found(PERSON), [], 'not found without a digest');
    await runHousekeeping(app.services);
    t.same(await found(PERSON), [mine], 'found after housekeeping');
    t.same(await found(COMPANY), [business], 'the company too');
  });
});

t.test(
  'a digest made under a master key still matches after a rotation, until housekeeping redoes it',
  async (t) => {
    const key = () => ({ id: `mk_${randomBytes(4).toString('hex')}`, key: randomBytes(32) });
    const before = key();
    const after = key();
    const stored = rutDigestsOf(new SecretBox(before), { rut: PERSON, password: 'x', rutEmpresa: null });
    const rotated = new SecretBox(after, [before]);
    t.ok(
      rutSearchDigests(rotated, formatRut(PERSON))!.includes(stored.rut_digest),
      'the older digest matches',
    );
    t.notOk(
      rutDigestsOf(rotated, { rut: PERSON, password: 'x', rutEmpresa: null }).rut_digest ===
        stored.rut_digest,
      'a new digest is under the new key',
    );
    t.equal(rutSearchDigests(rotated, 'not a rut'), null, 'text that is no RUT searches no digest');
    t.equal(rutSearchDigests(rotated, '12345678-0'), null, 'nor does a RUT with a wrong check digit');
  },
);
