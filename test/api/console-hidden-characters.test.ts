import t from 'tap';
import { signedIn, tenantWithHiddenCharacters } from '../helpers/console.js';
import { forEachEngine, startTestApp } from '../helpers/harness.js';

/*
 * Issue 44, item 6: the console shows a tenant's control, bidi and zero-width characters visibly, as the CLI
 * does (`\u202e`), on every page that prints them: a link's external_user_id, a webhook endpoint's
 * description, an organisation's name. U+202E (RIGHT-TO-LEFT OVERRIDE) reversed what followed it on the
 * page; escaped as HTML it ran no script, but `cust‮1147-remotsuc` read as `customer-7411‬`.
 */

const RLO = '\u202e';
/** What the pages may not hold raw: the bidi controls, the zero-width characters, C0/C1 controls but \n\t. */
const HIDDEN =
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/u;

const unescapeHtml = (text: string) =>
  text
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const { tenant, linkId, hookId } = await tenantWithHiddenCharacters(t, app, {
    externalUserId: `cust${RLO}1147-remotsuc\u200b\u0007`,
    description: `payroll ${RLO}\u2066kooh\u2069 \ufeffdone`,
  });
  const operator = await signedIn(app, 'operator', null, 'ops@lender.cl');
  const base = `/console/o/${tenant.orgId}/test`;

  const pages: [string, string, string[]][] = [
    ['the organisations', '/console/orgs', ['Lender \\u202eexe.gpj']],
    ['the overview', base, ['Lender \\u202eexe.gpj']],
    ['the links', `${base}/links`, ['cust\\u202e1147-remotsuc\\u200b\\u0007']],
    ['the link', `${base}/links/${linkId}`, ['cust\\u202e1147-remotsuc\\u200b\\u0007']],
    ['the endpoint', `${base}/webhooks/${hookId}`, ['payroll \\u202e\\u2066kooh\\u2069 \\ufeffdone']],
  ];
  for (const [name, path, shown] of pages) {
    const page = await operator('GET', path);
    t.equal(page.status, 200, `${name}: ${path}`);
    for (const text of shown) t.ok(page.text.includes(text), `${name} shows ${text}`);
    // The edit form's field keeps the exact value, so that saving it unchanged rewrites nothing.
    const withoutFields = page.text.replace(/<input [^>]*>/g, '');
    const raw = HIDDEN.exec(withoutFields);
    t.equal(raw, null, `${name}: no raw control, bidi or zero-width character in its text`);
  }

  const endpoint = await operator('GET', `${base}/webhooks/${hookId}`);
  t.match(
    endpoint.text,
    `value="payroll ${RLO}\u2066kooh\u2069 \ufeffdone"`,
    'the description field holds the exact value',
  );
  // The form sent back as the page holds it: the fields' values and the ticked boxes.
  const fields = Object.fromEntries(
    [...endpoint.text.matchAll(/<input [^>]*name="([^"]+)"[^>]*value="([^"]*)"[^>]*>/g)]
      .filter(([input]) => !input!.includes('type="checkbox"') || / checked/.test(input!))
      .filter(([, name]) => ['url', 'description'].includes(name!) || name!.startsWith('event'))
      .map(([, name, value]) => [name!, unescapeHtml(value!)]),
  );
  t.equal(fields.description, `payroll ${RLO}\u2066kooh\u2069 \ufeffdone`);
  const saved = await operator('POST', `${base}/webhooks/${hookId}`, fields);
  t.equal(saved.status, 200, 'the form sent back as shown is accepted');
  t.match(saved.text, 'There was nothing to change.', 'and changes nothing');
  const stored = await app.db.knex('webhook_endpoints').where({ id: hookId }).first();
  t.equal(
    stored.description,
    `payroll ${RLO}\u2066kooh\u2069 \ufeffdone`,
    'and the description is unchanged',
  );
});
