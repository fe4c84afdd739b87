import t from 'tap';
import {
  checkWebhookUrl,
  isBlockedAddress,
  mayReachPrivateAddresses,
} from '../../src/webhooks/url-policy.js';

t.test(
  'private, loopback, link-local, metadata and mapped addresses are blocked; public ones are not',
  async (t) => {
    for (const address of [
      '127.0.0.1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fe80::1',
      'fd00::1',
      '::ffff:10.0.0.1',
      '::ffff:127.0.0.1',
      // The forms that carry or reach a refused IPv4 address, as the URL parser and DNS write them.
      '::ffff:7f00:1',
      '::ffff:a9fe:a9fe',
      '::ffff:0:7f00:1',
      '::7f00:1',
      '::127.0.0.1',
      '64:ff9b::7f00:1',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b:1:7f00:1::',
      '2002:7f00:1::1',
      '2002:a00:1::',
      '2001:0:4136:e378:8000:63bf:80ff:fffe',
      '2001:0:7f00:1:8000:63bf:3fff:fdd2',
      // Special-purpose and deprecated IPv6 ranges.
      '::',
      '2001:db8::1',
      '100::1',
      'fec0::1',
      'ff02::1',
      'fd00:ec2::254',
      // Special-purpose IPv4 ranges.
      '192.0.2.1',
      '198.18.0.1',
      '255.255.255.255',
      '224.0.0.1',
      'not an address',
    ]) {
      t.equal(isBlockedAddress(address), true, address);
    }
    for (const address of [
      '93.184.216.34',
      '8.8.8.8',
      '2606:4700::1111',
      '::ffff:8.8.8.8',
      '::ffff:808:808',
      '64:ff9b::808:808',
      '2002:808:808::1',
    ]) {
      t.equal(isBlockedAddress(address), false, address);
    }
  },
);

t.test('both modes want a public address unless allowed; live mode also wants https', async (t) => {
  t.equal((await checkWebhookUrl('http://127.0.0.1:3000/hook', 'test', false)).ok, false);
  t.same(
    await checkWebhookUrl('http://93.184.216.34/hook', 'test', false),
    { ok: true },
    'test mode takes http',
  );
  t.equal((await checkWebhookUrl('http://127.0.0.1:3000/hook', 'live', false)).ok, false);
  t.equal((await checkWebhookUrl('http://93.184.216.34/hook', 'live', false)).ok, false, 'live wants https');
  t.equal((await checkWebhookUrl('https://127.0.0.1/hook', 'live', false)).ok, false);
  t.equal(
    (await checkWebhookUrl('https://localhost/hook', 'live', false)).ok,
    false,
    'a name resolving to loopback',
  );
  t.equal((await checkWebhookUrl('http://localhost:3000/hook', 'test', false)).ok, false, 'in test mode too');
  t.same(
    await checkWebhookUrl('https://127.0.0.1/hook', 'live', true),
    { ok: true },
    'the operator may allow private receivers',
  );
  t.same(await checkWebhookUrl('http://127.0.0.1:3000/hook', 'test', true), { ok: true });
  t.equal(
    (await checkWebhookUrl('https://user:pw@93.184.216.34/hook', 'live', false)).ok,
    false,
    'no credentials in the URL',
  );
  t.same(await checkWebhookUrl('https://93.184.216.34/hook', 'live', false), { ok: true });
});

t.test('who may reach private addresses: the operator decides; a listener on the box may', async (t) => {
  const shipped = { allowPrivateAddresses: false, allowPrivateAddressesInTestMode: false };
  t.equal(mayReachPrivateAddresses('test', false, shipped), false, "a tenant's test-mode endpoint may not");
  t.equal(mayReachPrivateAddresses('live', false, shipped), false);
  t.equal(
    mayReachPrivateAddresses('test', true, shipped),
    true,
    'the temporary endpoint of svc webhooks listen',
  );
  const devBox = { ...shipped, allowPrivateAddressesInTestMode: true };
  t.equal(mayReachPrivateAddresses('test', false, devBox), true);
  t.equal(
    mayReachPrivateAddresses('live', false, devBox),
    false,
    'the test-mode opt-in leaves live mode alone',
  );
  const internal = { ...shipped, allowPrivateAddresses: true };
  t.equal(mayReachPrivateAddresses('live', false, internal), true);
  t.equal(mayReachPrivateAddresses('test', false, internal), true);
});
