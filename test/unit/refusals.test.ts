import t from 'tap';
import { addressSubject } from '../../src/ratelimit/refusals.js';

t.test('a client is an IPv4 address, or an IPv6 /64', async (t) => {
  t.equal(addressSubject('203.0.113.7'), '203.0.113.7');
  t.equal(addressSubject('::ffff:203.0.113.7'), '203.0.113.7', 'an IPv4-mapped address is its IPv4 client');
  t.equal(
    addressSubject('2001:db8:1:2:aaaa::1'),
    addressSubject('2001:db8:1:2:ffff:ffff:ffff:ffff'),
    'two addresses of one /64 are one client: a host that rotates within its prefix gains nothing',
  );
  t.not(
    addressSubject('2001:db8:1:2::1'),
    addressSubject('2001:db8:1:3::1'),
    'another /64 is another client',
  );
  t.equal(addressSubject('not an address'), 'not an address', 'what is not an address is its own key');
});
