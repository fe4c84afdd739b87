import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { ConfigError, loadConfig } from '../../src/config/load-config.js';
import { contrast, resolveLogo, themeCss } from '../../src/widget/assets.js';
import { parseOrigin } from '../../src/widget/page-routes.js';

function home(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-widget-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

t.test('the widget settings default to the spec and read SVC_WIDGET_* variables', async (t) => {
  const dir = home(t);
  t.same(loadConfig({ home: dir, env: {} }).widget, {
    name: 'Bank Connect',
    primaryColour: '#1f5eff',
    logoUrl: '',
    tokenTtlMinutes: 10,
    exchangeTtlMinutes: 5,
    sessionTtlMinutes: 30,
    allowedOrigins: [],
    locale: 'es',
    allowedRedirectUris: [],
    consentStarts: { perMinute: 20, burst: 10 },
    consentStartsPerKey: { perMinute: 5, burst: 3 },
    consentStartsPerSession: { perMinute: 1, burst: 3 },
  });
  const config = loadConfig({
    home: dir,
    env: {
      SVC_WIDGET_NAME: 'Acme Pay',
      SVC_WIDGET_PRIMARY_COLOUR: '#0a7d33',
      SVC_WIDGET_LOGO_URL: 'logo.png',
      SVC_WIDGET_TOKEN_TTL_MINUTES: '15',
      SVC_WIDGET_EXCHANGE_TTL_MINUTES: '2',
      SVC_WIDGET_SESSION_TTL_MINUTES: '20',
      SVC_WIDGET_ALLOWED_ORIGINS: '["https://app.example.com", "http://127.0.0.1:3000"]',
      SVC_WIDGET_LOCALE: 'en',
      SVC_WIDGET_ALLOWED_REDIRECT_URIS: '["https://app.example.com/bank/", "http://127.0.0.1:3000/cb"]',
    },
  });
  t.same(config.widget, {
    name: 'Acme Pay',
    primaryColour: '#0a7d33',
    logoUrl: 'logo.png',
    tokenTtlMinutes: 15,
    exchangeTtlMinutes: 2,
    sessionTtlMinutes: 20,
    allowedOrigins: ['https://app.example.com', 'http://127.0.0.1:3000'],
    locale: 'en',
    allowedRedirectUris: ['https://app.example.com/bank/', 'http://127.0.0.1:3000/cb'],
    consentStarts: { perMinute: 20, burst: 10 },
    consentStartsPerKey: { perMinute: 5, burst: 3 },
    consentStartsPerSession: { perMinute: 1, burst: 3 },
  });
});

t.test('a bad widget setting names itself and its variable', async (t) => {
  const dir = home(t);
  for (const [name, value, key] of [
    ['SVC_WIDGET_PRIMARY_COLOUR', 'blue', 'widget.primaryColour'],
    ['SVC_WIDGET_LOGO_URL', '../secrets.png', 'widget.logoUrl'],
    ['SVC_WIDGET_LOGO_URL', '/etc/logo.png', 'widget.logoUrl'],
    ['SVC_WIDGET_LOGO_URL', 'javascript:alert(1)', 'widget.logoUrl'],
    ['SVC_WIDGET_TOKEN_TTL_MINUTES', '0', 'widget.tokenTtlMinutes'],
    ['SVC_WIDGET_ALLOWED_ORIGINS', '["https://app.example.com/path"]', 'widget.allowedOrigins'],
    ['SVC_WIDGET_LOCALE', 'fr', 'widget.locale'],
    ['SVC_WIDGET_ALLOWED_REDIRECT_URIS', '["app.example.com/cb"]', 'widget.allowedRedirectUris'],
    ['SVC_WIDGET_ALLOWED_REDIRECT_URIS', '["javascript:alert(1)"]', 'widget.allowedRedirectUris'],
  ] as const) {
    t.throws(
      () => loadConfig({ home: dir, env: { [name]: value } }),
      { name: ConfigError.name, message: new RegExp(`Invalid configuration: ${key.replace(/\./g, '\\.')}`) },
      `${name}=${value}`,
    );
  }
});

t.test('the theme keeps 4.5:1 contrast for text on the brand colour', async (t) => {
  const base = loadConfig({ home: home(t), env: {} }).widget;
  t.match(themeCss({ ...base, primaryColour: '#1f5eff' }).body, '--brand-ink: #ffffff;');
  t.match(themeCss({ ...base, primaryColour: '#ffcc00' }).body, '--brand-ink: #111827;');
  t.ok(contrast('#ffffff', '#1f5eff') >= 4.5);
  t.equal(Math.round(contrast('#000000', '#ffffff')), 21);
});

t.test('a logo is a URL or a file inside the data directory', async (t) => {
  const base = loadConfig({ home: home(t), env: {} }).widget;
  t.same(resolveLogo({ ...base, logoUrl: '' }, '/srv/svc'), { kind: 'none' });
  t.same(resolveLogo({ ...base, logoUrl: 'https://cdn.example.com/a.png' }, '/srv/svc'), {
    kind: 'url',
    src: 'https://cdn.example.com/a.png',
    origin: 'https://cdn.example.com',
  });
  t.match(resolveLogo({ ...base, logoUrl: 'data:image/png;base64,AAAA' }, '/srv/svc'), {
    kind: 'url',
    origin: null,
  });
  t.same(resolveLogo({ ...base, logoUrl: 'brand/logo.svg' }, '/srv/svc'), {
    kind: 'file',
    path: '/srv/svc/brand/logo.svg',
    contentType: 'image/svg+xml',
  });
});

t.test("the opener's origin is a scheme, a host and a port, nothing more", async (t) => {
  t.equal(parseOrigin('https://app.example.com'), 'https://app.example.com');
  t.equal(parseOrigin('http://127.0.0.1:3000'), 'http://127.0.0.1:3000');
  for (const bad of [
    '',
    'null',
    'https://app.example.com/',
    'https://a.example/x',
    'file:///x',
    'data:,x',
    42,
  ]) {
    t.equal(parseOrigin(bad), null, JSON.stringify(bad));
  }
});
