import { randomBytes } from 'node:crypto';
import t from 'tap';
import { SecretBox, SecretError, sameDigest, sha256Hex } from '../../src/secrets/secret-box.js';

const oldKey = { id: 'mk_old', key: randomBytes(32) };
const newKey = { id: 'mk_new', key: randomBytes(32) };

/** Flips one bit of the decoded bytes of part `index` of a sealed value. */
function flipBit(sealed: string, index: number, bit = 0): string {
  const parts = sealed.split('.');
  const bytes = Buffer.from(parts[index]!, index <= 1 ? 'utf8' : 'base64url');
  bytes[0] = bytes[0]! ^ (1 << bit);
  parts[index] = bytes.toString(index <= 1 ? 'utf8' : 'base64url');
  return parts.join('.');
}

t.test('a sealed value opens back to the plaintext', async (t) => {
  const box = new SecretBox(newKey);
  for (const plaintext of [
    'hunter2',
    '',
    'ñandú €',
    JSON.stringify({ rut: '12.345.678-5', password: 'x' }),
  ]) {
    const sealed = box.seal(plaintext, 'links.credentials');
    t.not(
      sealed.includes(plaintext) && plaintext !== '',
      true,
      'the plaintext is not visible in the sealed text',
    );
    t.equal(box.open(sealed, 'links.credentials'), plaintext);
  }
  const a = box.seal('same');
  const b = box.seal('same');
  t.not(a, b, 'each seal uses a fresh IV');
  t.match(a, /^v1\.mk_new\./, 'the ciphertext names its key');
});

t.test('a flipped bit in any part is detected', async (t) => {
  const box = new SecretBox(newKey);
  const sealed = box.seal('the webhook secret whsec_abc123', 'ctx');
  const names = ['version', 'key id', 'iv', 'tag', 'ciphertext'];
  for (let part = 0; part < 5; part++) {
    for (const bit of [0, 7]) {
      const tampered = flipBit(sealed, part, bit);
      t.not(tampered, sealed);
      t.throws(() => box.open(tampered, 'ctx'), SecretError, `bit ${bit} of the ${names[part]}`);
    }
  }
});

t.test('a truncated or missing part is detected', async (t) => {
  const box = new SecretBox(newKey);
  const sealed = box.seal('secret', 'ctx');
  const parts = sealed.split('.');
  const shortTag = Buffer.from(parts[3]!, 'base64url').subarray(0, 4).toString('base64url');
  t.throws(
    () => box.open([...parts.slice(0, 3), shortTag, parts[4]].join('.'), 'ctx'),
    SecretError,
    'a tag cut to 4 bytes is refused',
  );
  t.throws(() => box.open(parts.slice(0, 4).join('.'), 'ctx'), SecretError, 'a missing body');
  t.throws(() => box.open('', 'ctx'), SecretError, 'an empty string');
  t.throws(() => box.open('not a sealed value', 'ctx'), SecretError);
});

t.test('a different context does not open', async (t) => {
  const box = new SecretBox(newKey);
  const sealed = box.seal('secret', 'link_0123456789abcdef');
  t.throws(() => box.open(sealed, 'link_fedcba9876543210'), SecretError);
  t.throws(() => box.open(sealed), SecretError, 'nor does no context');
});

t.test('after a master key rotation old ciphertexts still open and are stale', async (t) => {
  const before = new SecretBox(oldKey);
  const oldSealed = before.seal('from last year', 'ctx');
  const after = new SecretBox(newKey, [oldKey]);
  t.equal(after.activeKeyId, 'mk_new');
  t.equal(after.open(oldSealed, 'ctx'), 'from last year');
  t.equal(after.isStale(oldSealed), true, 'a value sealed with the older key should be re-sealed');
  const fresh = after.seal('from today', 'ctx');
  t.equal(after.isStale(fresh), false);
  t.match(fresh, /^v1\.mk_new\./, 'new values use the active key');
  t.throws(() => before.open(fresh, 'ctx'), { name: 'SecretError', message: /unknown master key mk_new/ });
  t.throws(() => new SecretBox(newKey).open(oldSealed, 'ctx'), SecretError, 'without the older key it fails');
});

t.test('a key with the right id but the wrong bytes fails the integrity check', async (t) => {
  const sealed = new SecretBox(newKey).seal('secret');
  const impostor = new SecretBox({ id: 'mk_new', key: randomBytes(32) });
  t.throws(() => impostor.open(sealed), { name: 'SecretError', message: /integrity/ });
});

t.test('digests', async (t) => {
  t.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  t.equal(sameDigest(sha256Hex('a'), sha256Hex('a')), true);
  t.equal(sameDigest(sha256Hex('a'), sha256Hex('b')), false);
  t.equal(sameDigest(sha256Hex('a'), sha256Hex('a').slice(0, 62)), false, 'different lengths never match');
});
