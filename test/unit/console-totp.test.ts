import { randomBytes } from 'node:crypto';
import t from 'tap';
import { CONSOLE_CATALOGUES } from '../../src/console/messages.js';
import {
  acceptedStep,
  base32Decode,
  base32Encode,
  codeChecker,
  groupedSecret,
  hotp,
  newTotpSecret,
  openEnrolment,
  openTotpSecret,
  otpauthUri,
  sealEnrolment,
  sealTotpSecret,
  totpCode,
  totpStep,
  ENROLMENT_TTL_MS,
  TOTP_STEP_MS,
} from '../../src/console/totp.js';
import { SecretBox } from '../../src/secrets/secret-box.js';

/*
 * The console's TOTP (RFC 6238) against the RFC's own test vectors, base32 against RFC 4648's, the ±1 step
 * window, no code twice, and the sealing of the saved and the pending secret.
 */

const RFC_SECRET = Buffer.from('12345678901234567890');
/** RFC 6238 appendix B, SHA1: time in seconds → the 8-digit TOTP. */
const RFC_VECTORS: [number, string][] = [
  [59, '94287082'],
  [1111111109, '07081804'],
  [1111111111, '14050471'],
  [1234567890, '89005924'],
  [2000000000, '69279037'],
  [20000000000, '65353130'],
];

t.test("RFC 6238's SHA1 vectors", async (t) => {
  for (const [seconds, expected] of RFC_VECTORS) {
    t.equal(hotp(RFC_SECRET, totpStep(seconds * 1000), 8), expected, `${seconds} s, 8 digits`);
    t.equal(totpCode(RFC_SECRET, seconds * 1000), expected.slice(-6), `${seconds} s, 6 digits`);
  }
});

t.test("base32 against RFC 4648's vectors, and back", async (t) => {
  const vectors: [string, string][] = [
    ['', ''],
    ['f', 'MY'],
    ['fo', 'MZXQ'],
    ['foo', 'MZXW6'],
    ['foob', 'MZXW6YQ'],
    ['fooba', 'MZXW6YTB'],
    ['foobar', 'MZXW6YTBOI'],
  ];
  for (const [plain, encoded] of vectors) {
    t.equal(base32Encode(Buffer.from(plain)), encoded, plain);
    t.equal(base32Decode(encoded)?.toString(), plain, encoded);
  }
  t.equal(base32Encode(RFC_SECRET), 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ');
  t.same(base32Decode('gezd gnbv-gy3t qojq gezdgnbvgy3tqojq'), RFC_SECRET, 'case, spaces, hyphens');
  t.same(base32Decode('MZXW6YQ='), Buffer.from('foob'), 'padding');
  t.equal(base32Decode('MZXW6Y1'), null, 'a 1 is no base32 digit');
  for (let i = 0; i < 50; i++) {
    const bytes = randomBytes(i);
    t.same(base32Decode(base32Encode(bytes)), bytes);
  }
  const secret = newTotpSecret();
  t.match(secret, /^[A-Z2-7]{32}$/, 'a new secret is 20 bytes, 32 base32 characters');
  t.not(newTotpSecret(), secret);
  t.equal(groupedSecret('GEZDGNBVGY3TQOJQ'), 'GEZD GNBV GY3T QOJQ');
});

t.test('a code is accepted one step early or late, and never twice', async (t) => {
  const now = 1111111111_000;
  const step = totpStep(now);
  const code = (offset: number) => hotp(RFC_SECRET, step + offset);
  t.equal(acceptedStep(RFC_SECRET, code(0), now, null), step);
  t.equal(acceptedStep(RFC_SECRET, code(-1), now, null), step - 1, 'the previous step');
  t.equal(acceptedStep(RFC_SECRET, code(1), now, null), step + 1, 'the next step');
  t.equal(acceptedStep(RFC_SECRET, code(-2), now, null), null, 'two steps ago');
  t.equal(acceptedStep(RFC_SECRET, code(2), now, null), null, 'two steps ahead');
  t.equal(acceptedStep(RFC_SECRET, code(0), now, step), null, 'the step already accepted');
  t.equal(acceptedStep(RFC_SECRET, code(-1), now, step), null, 'an older step than the last accepted');
  t.equal(acceptedStep(RFC_SECRET, code(1), now, step), step + 1, 'a later one still works');
  t.equal(
    acceptedStep(RFC_SECRET, ` ${code(0).slice(0, 3)} ${code(0).slice(3)} `, now, null),
    step,
    'spaces',
  );
  for (const bad of ['', '12345', '1234567', 'abcdef', '12345a', '１２３４５６'])
    t.equal(acceptedStep(RFC_SECRET, bad, now, null), null, JSON.stringify(bad));
  t.equal(acceptedStep(randomBytes(20), code(0), now, null), null, 'another secret');
});

t.test('the otpauth URI', async (t) => {
  const uri = otpauthUri('Banco Ñandú & Co', 'ana@lender.cl', 'GEZDGNBVGY3TQOJQ');
  t.equal(
    uri,
    'otpauth://totp/Banco%20%C3%91and%C3%BA%20%26%20Co:ana%40lender.cl?secret=GEZDGNBVGY3TQOJQ&issuer=Banco%20%C3%91and%C3%BA%20%26%20Co&algorithm=SHA1&digits=6&period=30',
  );
  const parsed = new URL(uri);
  t.equal(parsed.searchParams.get('issuer'), 'Banco Ñandú & Co');
  t.equal(parsed.searchParams.get('secret'), 'GEZDGNBVGY3TQOJQ');
});

t.test('the saved and the pending secret are sealed, bound to their user and session', async (t) => {
  const box = new SecretBox({ id: 'mk_unit', key: randomBytes(32) });
  const secret = newTotpSecret();
  const sealed = sealTotpSecret(box, 'cu_a', secret);
  t.notMatch(sealed, secret);
  t.same(openTotpSecret(box, 'cu_a', sealed), base32Decode(secret));
  t.equal(openTotpSecret(box, 'cu_b', sealed), null, "another user's row does not open it");

  const now = 1_800_000_000_000;
  const session = { userId: 'cu_a', csrf: 'csrf-1' };
  const pending = sealEnrolment(box, session, secret, now);
  t.notMatch(pending, secret);
  t.equal(openEnrolment(box, session, pending, now + 60_000), secret);
  t.equal(openEnrolment(box, { ...session, csrf: 'csrf-2' }, pending, now), null, 'another session');
  t.equal(openEnrolment(box, { ...session, userId: 'cu_b' }, pending, now), null, 'another user');
  t.equal(openEnrolment(box, session, pending, now + ENROLMENT_TTL_MS), null, 'expired');
  t.equal(openEnrolment(box, session, `${pending}x`, now), null, 'changed');
  t.equal(openEnrolment(box, session, 'garbage', now), null, 'garbage');

  const check = (code: string | undefined, lastStep: number | null = null) =>
    codeChecker(box, code, now)({ userId: 'cu_a', sealed, lastStep });
  const right = totpCode(base32Decode(secret)!, now);
  t.equal(check(undefined), 'missing');
  t.equal(check('  '), 'missing');
  t.equal(check(right), totpStep(now));
  t.equal(check(right, totpStep(now)), false, 'spent');
  t.equal(check(right === '000000' ? '000001' : '000000'), false, 'wrong');
  const unreadable: string[] = [];
  const damaged = codeChecker(box, right, now, (userId) => unreadable.push(userId));
  t.equal(damaged({ userId: 'cu_a', sealed: `${sealed}x`, lastStep: null }), false, 'a damaged secret');
  t.same(unreadable, ['cu_a'], 'is reported, by user');
  t.equal(TOTP_STEP_MS, 30_000);
});

t.test("the console's catalogues have the same keys, none empty", async (t) => {
  const es = Object.keys(CONSOLE_CATALOGUES.es).sort();
  const en = Object.keys(CONSOLE_CATALOGUES.en).sort();
  t.same(en, es);
  const empty = (['es', 'en'] as const).flatMap((locale) =>
    Object.entries(CONSOLE_CATALOGUES[locale])
      .filter(([, text]) => text.trim() === '')
      .map(([key]) => `${locale} ${key}`),
  );
  t.same(empty, [], 'no empty message');
});
