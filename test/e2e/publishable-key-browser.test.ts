import t from 'tap';
import type { Page } from 'playwright-core';
import { launchChromium, requireChromium, servePage } from '../helpers/browser.js';
import { createTenant, forEachEngine, startTestApp, tableCounts, type TestApp } from '../helpers/harness.js';

/*
 * The spec calls the publishable key browser-safe: a customer's page creates widget tokens with it, with
 * `fetch`, from the origins the operator allows. Headless Chromium enforces CORS as a visitor's browser
 * does, so what a page may read here is what it may read in the field.
 */

/** A page that calls the API with fetch and reports what the browser let it see. */
const CALLER = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Customer app</title></head>
<body><h1>Customer app</h1>
<script>
  window.call = async (url, method, key, body) => {
    try {
      const response = await fetch(url, {
        method,
        headers: { Authorization: 'Bearer ' + key, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return {
        read: true,
        status: response.status,
        body: await response.json(),
        requestId: response.headers.get('X-Request-Id'),
        rateLimit: response.headers.get('X-RateLimit-Limit'),
      };
    } catch (error) {
      return { read: false, error: String(error) };
    }
  };
</script></body></html>`;

interface CallResult {
  read: boolean;
  status?: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body?: any;
  requestId?: string | null;
  rateLimit?: string | null;
  error?: string;
}

type PageCall = (url: string, method: string, key: string, body?: unknown) => Promise<CallResult>;

function call(page: Page, url: string, method: string, key: string, body?: unknown): Promise<CallResult> {
  return page.evaluate(
    ([url, method, key, body]) => (globalThis as unknown as { call: PageCall }).call(url, method, key, body),
    [url, method, key, body] as const,
  );
}

if (requireChromium(t)) {
  forEachEngine(t, async (t, engine) => {
    const allowedPage = await servePage(t, CALLER);
    const otherPage = await servePage(t, CALLER);
    const app: TestApp = await startTestApp(t, engine, {
      config: { widget: { allowedOrigins: [allowedPage] } },
    });
    const tenant = await createTenant(app);
    const pk = tenant.keys.pk_test.secret;
    const sk = tenant.keys.sk_test.secret;
    const tokens = `${app.url}/v1/widget_tokens`;
    const context = await launchChromium(t);

    t.test('a page of an allowed origin creates a widget token with the publishable key', async (t) => {
      const page = await context.newPage();
      await page.goto(allowedPage);
      const made = await call(page, tokens, 'POST', pk, { external_user_id: 'user-from-browser' });
      t.equal(made.read, true, `the browser let the page read the answer (${made.error ?? 'read'})`);
      t.equal(made.status, 200);
      t.equal(made.body?.object, 'widget_token');
      t.match(made.body?.token, /^wt_/, 'with the token the widget opens with');
      t.match(made.requestId, /^req_/, 'X-Request-Id is readable');
      t.equal(made.rateLimit, '30', 'and so are the rate-limit headers');

      const refused = await call(page, tokens, 'POST', pk, { intent: 'nonsense' });
      t.equal(refused.read, true, 'an error is readable too, so the page can say what went wrong');
      t.equal(refused.status, 400);
      t.equal(refused.body?.error?.param, 'intent');
      const unknown = await call(page, tokens, 'POST', `${pk.slice(0, -4)}aaaa`, {});
      t.equal(unknown.status, 401, 'and a 401 for a mistyped key');
      await page.close();
    });

    t.test(
      'the browser keeps from a page what a secret key fetched, and every secret-key route',
      async (t) => {
        const page = await context.newPage();
        await page.goto(allowedPage);
        const before = await tableCounts(app.db);
        const withSecret = await call(page, tokens, 'POST', sk, {});
        t.equal(
          withSecret.read,
          false,
          `a secret key's widget token is not handed to the page (${withSecret.error})`,
        );
        const links = await call(page, `${app.url}/v1/links`, 'GET', sk);
        t.equal(links.read, false, 'GET /v1/links from a page is blocked');
        const created = await call(page, `${app.url}/v1/links`, 'POST', sk, {});
        t.equal(created.read, false, 'POST /v1/links is never sent: its preflight is refused');
        const counts = await tableCounts(app.db);
        t.equal(counts.links, before.links, 'and no link was created');
        await page.close();
      },
    );

    t.test('a page of another origin cannot call it', async (t) => {
      const page = await context.newPage();
      await page.goto(otherPage);
      const before = await tableCounts(app.db);
      const made = await call(page, tokens, 'POST', pk, {});
      t.equal(made.read, false, `blocked (${made.error})`);
      t.same(await tableCounts(app.db), before, 'the refused preflight kept the request from being sent');
      await page.close();
    });

    t.test('what the browser is told, header by header', async (t) => {
      const preflight = await fetch(tokens, {
        method: 'OPTIONS',
        headers: {
          Origin: allowedPage,
          'Access-Control-Request-Method': 'POST',
          'Access-Control-Request-Headers': 'authorization, content-type',
        },
      });
      t.equal(preflight.status, 204);
      t.equal(preflight.headers.get('access-control-allow-origin'), allowedPage);
      t.match(preflight.headers.get('access-control-allow-headers'), /Authorization/);
      t.match(preflight.headers.get('vary'), /Origin/);

      const foreign = await fetch(tokens, {
        method: 'OPTIONS',
        headers: { Origin: otherPage, 'Access-Control-Request-Method': 'POST' },
      });
      t.equal(foreign.status, 403);
      t.equal(((await foreign.json()) as { error: { code: string } }).error.code, 'origin_not_allowed');
      t.equal(foreign.headers.get('access-control-allow-origin'), null);

      for (const path of ['/v1/links', '/v1/accounts', '/v1/webhook_endpoints', '/v1/refresh_intents']) {
        const secretRoute = await fetch(`${app.url}${path}`, {
          method: 'OPTIONS',
          headers: { Origin: allowedPage, 'Access-Control-Request-Method': 'GET' },
        });
        t.equal(secretRoute.headers.get('access-control-allow-origin'), null, `no CORS on OPTIONS ${path}`);
        const answered = await app.request('GET', path, { key: sk, headers: { Origin: allowedPage } });
        t.equal(answered.headers.get('access-control-allow-origin'), null, `no CORS on GET ${path}`);
      }
      const withSecret = await app.request('POST', '/v1/widget_tokens', {
        key: sk,
        body: {},
        headers: { Origin: allowedPage },
      });
      t.equal(withSecret.status, 200, 'a server may still use its secret key here');
      t.equal(withSecret.headers.get('access-control-allow-origin'), null, 'but never with CORS headers');
    });
  });

  t.test('with no allowed origins listed, any page may use the publishable key', async (t) => {
    const page = await servePage(t, CALLER);
    const app = await startTestApp(t, 'sqlite');
    const preflight = await fetch(`${app.url}/v1/widget_tokens`, {
      method: 'OPTIONS',
      headers: { Origin: page, 'Access-Control-Request-Method': 'POST' },
    });
    t.equal(preflight.status, 204);
    t.equal(preflight.headers.get('access-control-allow-origin'), page);
  });
}
