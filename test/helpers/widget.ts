import { request, runSyncs, type TestApp, type TestResponse } from './harness.js';

/** A page origin that opens the widget (nothing listens there: the HTTP tests only need it named). */
export const OPENER = 'http://127.0.0.1:9';

export interface OpenedWidget {
  status: number;
  html: string;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  bootstrap: any;
}

/**
 * `GET /widget?token=…&origin=…` as a browser would: an HTML page, with the JSON its script starts from. The
 * browser's language is English unless `language` says otherwise (null: no Accept-Language at all), so the
 * tests can read the page's words.
 */
export async function openWidget(
  app: Pick<TestApp, 'url'>,
  token: string,
  origin = OPENER,
  language: string | null = 'en',
): Promise<OpenedWidget> {
  const query = new URLSearchParams({ token, ...(origin ? { origin } : {}) });
  const response = await fetch(`${app.url}/widget?${query}`, {
    headers: language === null ? {} : { 'Accept-Language': language },
  });
  return pageOf(response);
}

/** The widget's page and the JSON its script starts from (null when the page has none). */
async function pageOf(response: Response): Promise<OpenedWidget> {
  const html = await response.text();
  const match = /<script type="application\/json" id="widget-bootstrap">(.*?)<\/script>/s.exec(html);
  return {
    status: response.status,
    html,
    headers: response.headers,
    bootstrap: match ? JSON.parse(match[1]!) : null,
  };
}

/**
 * A page of the widget at `url` as a browser speaking `language` gets it, with a cookie when given: the
 * consent callback the bank sends the browser to, above all.
 */
export async function widgetPage(
  url: string,
  options: { language?: string; cookie?: string } = {},
): Promise<OpenedWidget> {
  const headers: Record<string, string> = { 'accept-language': options.language ?? 'en' };
  if (options.cookie !== undefined) headers.cookie = options.cookie;
  return pageOf(await fetch(url, { headers }));
}

/** A call to the widget's JSON API with its session header (errors are checked against the envelope). */
export function widgetApi(
  app: Pick<TestApp, 'url'>,
  session: string,
  method: 'GET' | 'POST',
  path: 'status' | 'credentials' | 'mfa' | 'finish' | 'consent',
  body?: unknown,
): Promise<TestResponse> {
  return request(app.url, method, `/widget/api/${path}`, {
    headers: { 'X-Widget-Session': session },
    ...(body !== undefined ? { body } : method === 'POST' ? { body: {} } : {}),
  });
}

export interface WidgetTokenBody {
  intent?: string;
  product?: string;
  institution_id?: string;
  username_prefill?: string;
  external_user_id?: string;
  link_id?: string;
  connection_limit?: number;
  locale?: string;
  redirect_uri?: string;
  state?: string;
}

export async function widgetToken(app: TestApp, key: string, body: WidgetTokenBody = {}): Promise<string> {
  const response = await app.request('POST', '/v1/widget_tokens', { key, body });
  if (response.status !== 200) throw new Error(`widget token: ${response.status} ${response.text}`);
  return response.body.token as string;
}

/**
 * The whole widget connect over HTTP: token, open, credentials, the first sync, success and the exchange
 * token the widget would post to its opener.
 */
export async function connectThroughWidget(
  app: TestApp,
  key: string,
  options: { password?: string; rut?: string; bank_id?: string; token?: WidgetTokenBody } = {},
): Promise<{ exchangeToken: string; session: string }> {
  const token = await widgetToken(app, key, options.token);
  const opened = await openWidget(app, token);
  if (opened.status !== 200) throw new Error(`open: ${opened.status}`);
  const session = opened.bootstrap.session as string;
  const submitted = await widgetApi(app, session, 'POST', 'credentials', {
    bank_id: options.bank_id ?? 'bancochile',
    rut: options.rut ?? '12.345.678-5',
    password: options.password ?? 'sandbox',
  });
  if (submitted.status !== 200) throw new Error(`credentials: ${submitted.status} ${submitted.text}`);
  await runSyncs(app);
  const status = await widgetApi(app, session, 'GET', 'status');
  if (status.body.state !== 'succeeded') throw new Error(`status: ${status.text}`);
  const finished = await widgetApi(app, session, 'POST', 'finish');
  if (finished.status !== 200) throw new Error(`finish: ${finished.status} ${finished.text}`);
  return { exchangeToken: finished.body.exchange_token as string, session };
}

/**
 * A refresh of `linkId` asked and run to the bank's question for a code (a link of an MFA sandbox user): the
 * refresh intent as the API then shows it, with `requires_mfa.widget_token`.
 */
export async function refreshAwaitingMfa(
  app: TestApp,
  key: string,
  linkId: string,
  body: Record<string, unknown> = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
): Promise<any> {
  const intent = await app.request('POST', '/v1/refresh_intents', {
    key,
    body: { link_id: linkId, ...body },
  });
  if (intent.status !== 200) throw new Error(`refresh: ${intent.status} ${intent.text}`);
  await runSyncs(app);
  return (await app.request('GET', `/v1/refresh_intents/${intent.body.id}`, { key })).body;
}
