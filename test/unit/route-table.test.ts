import t from 'tap';
import { RouteTable } from '../../src/http/route-table.js';

// The API's URLs meant what koa-router (path-to-regexp 8, its defaults) made of them; they still must.
const table = new RouteTable([
  { method: 'GET', path: '/v1/links', route: 'list links' },
  { method: 'POST', path: '/v1/links', route: 'create link' },
  { method: 'GET', path: '/v1/links/{linkId}', route: 'get link' },
  { method: 'DELETE', path: '/v1/links/{linkId}', route: 'delete link' },
  { method: 'GET', path: '/v1/links/search', route: 'search links' },
  { method: 'GET', path: '/v1/links/{linkId}/accounts/{accountId}', route: 'get account' },
  { method: 'OPTIONS', path: '/v1/widget_tokens', route: 'preflight' },
  { method: 'POST', path: '/v1/widget_tokens', route: 'create token' },
]);

const routeOf = (method: string, path: string) => {
  const found = table.match(method, path);
  return found.kind === 'route' ? found.route : found.kind;
};

t.test('a method and path find their route, with the parameters', async (t) => {
  t.same(table.match('GET', '/v1/links/lnk_1'), {
    kind: 'route',
    route: 'get link',
    params: { linkId: 'lnk_1' },
  });
  t.same(table.match('GET', '/v1/links/lnk_1/accounts/acc_2'), {
    kind: 'route',
    route: 'get account',
    params: { linkId: 'lnk_1', accountId: 'acc_2' },
  });
  t.equal(routeOf('POST', '/v1/links'), 'create link', 'the method chooses among routes of one path');
  t.equal(routeOf('DELETE', '/v1/links/lnk_1'), 'delete link');
});

t.test('URLs match as koa-router matched them', async (t) => {
  t.equal(routeOf('GET', '/V1/LINKS'), 'list links', 'fixed segments ignore case');
  t.same(
    table.match('GET', '/V1/Links/LNK_1'),
    { kind: 'route', route: 'get link', params: { linkId: 'LNK_1' } },
    'a parameter keeps its case',
  );
  t.equal(routeOf('GET', '/v1/links/'), 'list links', 'one trailing slash is allowed');
  t.equal(routeOf('GET', '/v1/links//'), 'none', 'two are not');
  t.equal(routeOf('GET', '//v1/links'), 'none', 'nor an empty segment in front');
  t.equal(routeOf('GET', '/v1/links//accounts/acc_2'), 'none', 'a parameter is never empty');
  t.equal(routeOf('HEAD', '/v1/links/lnk_1'), 'get link', 'HEAD finds the GET route');
  t.equal(routeOf('HEAD', '/v1/widget_tokens'), 'method', 'and only a GET route');
  t.equal(
    routeOf('GET', '/v1/links/search'),
    'get link',
    'the first declared route wins, as it did (a fixed segment declared later does not)',
  );
});

t.test(
  'parameters are percent-decoded, reading + as a space, and kept as sent when they do not decode',
  async (t) => {
    const params = (path: string) => {
      const found = table.match('GET', path);
      return found.kind === 'route' ? found.params.linkId : undefined;
    };
    t.equal(params('/v1/links/lnk%201'), 'lnk 1');
    t.equal(params('/v1/links/a+b'), 'a b');
    t.equal(params('/v1/links/%C3%B1'), 'ñ');
    t.equal(params('/v1/links/%zz'), '%zz');
    t.equal(params('/v1/links/%2F'), '/', 'an encoded slash is part of the parameter, not a separator');
  },
);

t.test('a known path asked with another method lists the methods it has, in declared order', async (t) => {
  t.same(table.match('PUT', '/v1/links'), { kind: 'method', allowed: ['HEAD', 'GET', 'POST'] });
  t.same(table.match('POST', '/v1/links/lnk_1'), { kind: 'method', allowed: ['HEAD', 'GET', 'DELETE'] });
  t.same(table.match('GET', '/v1/widget_tokens'), { kind: 'method', allowed: ['OPTIONS', 'POST'] });
  t.same(table.match('GET', '/v1/nothing'), { kind: 'none' }, 'an unknown path is none');
  t.same(table.match('GET', '/v1/links/lnk_1/accounts'), { kind: 'none' }, 'as is a known prefix');
});
