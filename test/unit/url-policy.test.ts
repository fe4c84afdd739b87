import t from 'tap';
import { checkWebhookUrl, isBlockedAddress } from '../../src/webhooks/url-policy.js';

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
    ]) {
      t.equal(isBlockedAddress(address), true, address);
    }
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8']) {
      t.equal(isBlockedAddress(address), false, address);
    }
  },
);

t.test(
  'test mode takes any http(s) URL; live mode wants https to a public address unless allowed',
  async (t) => {
    t.same(await checkWebhookUrl('http://127.0.0.1:3000/hook', 'test', false), { ok: true });
    t.equal((await checkWebhookUrl('http://127.0.0.1:3000/hook', 'live', false)).ok, false);
    t.equal((await checkWebhookUrl('https://127.0.0.1/hook', 'live', false)).ok, false);
    t.equal(
      (await checkWebhookUrl('https://localhost/hook', 'live', false)).ok,
      false,
      'a name resolving to loopback',
    );
    t.same(
      await checkWebhookUrl('https://127.0.0.1/hook', 'live', true),
      { ok: true },
      'the operator may allow private receivers',
    );
    t.equal(
      (await checkWebhookUrl('https://user:pw@93.184.216.34/hook', 'live', false)).ok,
      false,
      'no credentials in the URL',
    );
    t.same(await checkWebhookUrl('https://93.184.216.34/hook', 'live', false), { ok: true });
  },
);
