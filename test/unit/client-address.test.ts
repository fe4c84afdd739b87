import t from 'tap';
import { proxyEntryProblem, resolveClientAddress, trustedProxies } from '../../src/net/client-address.js';

/*
 * The client's address (issue 44, item 1): the connection's, unless it comes from a proxy listed in
 * `api.trustProxy`; then the right-most X-Forwarded-For entry that is not a listed proxy.
 */

const none = trustedProxies([]);
const proxies = trustedProxies(['127.0.0.1', '10.0.0.0/8', 'fd00::/8']);

t.test('off by default: the header is never read', async (t) => {
  t.equal(resolveClientAddress('203.0.113.5', '198.51.100.1', none), '203.0.113.5');
  t.equal(resolveClientAddress('127.0.0.1', '198.51.100.1', none), '127.0.0.1');
  t.equal(resolveClientAddress('::ffff:127.0.0.1', undefined, none), '127.0.0.1', 'IPv4-mapped as IPv4');
});

t.test('from a listed proxy: the right-most untrusted entry', async (t) => {
  t.equal(resolveClientAddress('127.0.0.1', '203.0.113.5', proxies), '203.0.113.5');
  t.equal(resolveClientAddress('::ffff:127.0.0.1', '203.0.113.5', proxies), '203.0.113.5');
  t.equal(
    resolveClientAddress('127.0.0.1', '1.2.3.4, 203.0.113.5', proxies),
    '203.0.113.5',
    'what the client wrote itself (left) is not believed',
  );
  t.equal(resolveClientAddress('127.0.0.1', '203.0.113.5, 10.1.2.3', proxies), '203.0.113.5', 'two proxies');
  t.equal(
    resolveClientAddress('127.0.0.1', ['1.2.3.4', '203.0.113.5'], proxies),
    '203.0.113.5',
    'headers sent twice read as one list',
  );
  t.equal(resolveClientAddress('127.0.0.1', '[2001:db8::7]:443', proxies), '2001:db8::7', 'a bracketed v6');
  t.equal(resolveClientAddress('127.0.0.1', '203.0.113.5:5123', proxies), '203.0.113.5', 'a v4 with a port');
  t.equal(resolveClientAddress('fd00::2', '2001:db8::9', proxies), '2001:db8::9', 'an IPv6 proxy range');
  t.equal(resolveClientAddress('127.0.0.1', undefined, proxies), '127.0.0.1', 'no header: the proxy');
  t.equal(resolveClientAddress('127.0.0.1', '10.0.0.3, 10.0.0.4', proxies), '10.0.0.3', 'all proxies');
  t.equal(
    resolveClientAddress('127.0.0.1', '203.0.113.5, garbage', proxies),
    '127.0.0.1',
    'an entry that is no address stops at the proxy that wrote it',
  );
});

t.test('from an unlisted connection the header is ignored', async (t) => {
  t.equal(resolveClientAddress('203.0.113.5', '10.0.0.3', proxies), '203.0.113.5');
  t.equal(resolveClientAddress('192.0.2.1', '127.0.0.1', proxies), '192.0.2.1');
});

t.test('entries of api.trustProxy are checked', async (t) => {
  for (const good of ['127.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8', '0.0.0.0/0'])
    t.equal(proxyEntryProblem(good), null, good);
  for (const bad of [
    'localhost',
    '10.0.0.0/33',
    '::/129',
    '10.0.0.0/8/1',
    '10.0.0.0/x',
    '::ffff:10.0.0.0/104',
    '',
  ])
    t.ok(proxyEntryProblem(bad), `${bad}: ${proxyEntryProblem(bad)}`);
});
