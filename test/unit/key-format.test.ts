import t from 'tap';
import { generateApiKey, parseApiKey } from '../../src/keys/key-format.js';

t.test('a generated key parses back to its brand, type and mode', async (t) => {
  const key = generateApiKey('svc', 'secret', 'live');
  t.match(key, /^svc_sk_live_[0-9A-Za-z]{38}$/);
  t.same(parseApiKey(key, 'svc'), { brand: 'svc', type: 'secret', mode: 'live', prefix: 'svc_sk_live_' });
  t.same(parseApiKey(generateApiKey('acme', 'publishable', 'test'), 'acme')?.type, 'publishable');
});

t.test('a mistyped key fails its checksum before any lookup', async (t) => {
  const key = generateApiKey('svc', 'secret', 'test');
  for (const position of [12, 20, key.length - 8, key.length - 1]) {
    const original = key[position]!;
    const replacement = original === 'a' ? 'b' : 'a';
    const typo = key.slice(0, position) + replacement + key.slice(position + 1);
    t.equal(parseApiKey(typo, 'svc'), null, `a change at position ${position} is refused`);
  }
  t.equal(parseApiKey(key.slice(0, -1), 'svc'), null, 'a truncated key is refused');
  t.equal(parseApiKey(key + 'x', 'svc'), null, 'a key with a trailing character is refused');
});

t.test("another brand's key is refused", async (t) => {
  t.equal(parseApiKey(generateApiKey('acme', 'secret', 'test'), 'svc'), null);
});

t.test('the type and mode cannot be edited without breaking the checksum', async (t) => {
  const key = generateApiKey('svc', 'secret', 'test');
  t.equal(parseApiKey(key.replace('_test_', '_live_'), 'svc'), null);
  t.equal(parseApiKey(key.replace('_sk_', '_pk_'), 'svc'), null);
});
