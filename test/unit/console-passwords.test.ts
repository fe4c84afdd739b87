import { randomBytes, scryptSync } from 'node:crypto';
import t from 'tap';
import {
  hashPassword,
  MAX_WAITING,
  passwordProblem,
  PasswordChecksBusy,
  verifyPassword,
} from '../../src/console/passwords.js';

/*
 * Console passwords: a slow salted hash that checks what it made, and a bounded queue in front of it, so that
 * a flood of sign-ins is refused at once rather than held in memory for minutes.
 */

/** A stored hash in our format with a cheap cost (N = 2^10), as an older or test hash would be. */
function cheapHash(password: string): string {
  const salt = randomBytes(16);
  const key = scryptSync(password.normalize('NFKC'), salt, 32, { N: 2 ** 10, r: 8, p: 1 });
  return ['scrypt', 10, 8, 1, salt.toString('base64url'), key.toString('base64url')].join('$');
}

t.test('a hash checks its own password and no other; no two hashes alike', async (t) => {
  const stored = await hashPassword('a long and quiet password');
  t.match(stored, /^scrypt\$17\$8\$1\$[\w-]{22}\$[\w-]{43}$/, 'its parameters are stored with it');
  t.notOk(stored.includes('quiet'), 'not the password');
  t.ok(await verifyPassword('a long and quiet password', stored));
  t.notOk(await verifyPassword('a long and quiet passwore', stored));
  t.not(await hashPassword('a long and quiet password'), stored, 'salted');
  t.notOk(await verifyPassword('anything at all here', null), 'no stored hash checks nothing');
});

t.test('length bounds', async (t) => {
  t.match(passwordProblem('short'), /at least 12/);
  t.match(passwordProblem('x'.repeat(257)), /at most 256/);
  t.equal(passwordProblem('twelve chars'), null);
});

t.test(`at most ${MAX_WAITING} checks wait for a turn; the next is refused at once`, async (t) => {
  const stored = cheapHash('a long and quiet password');
  // Two run and MAX_WAITING wait; one more finds the queue full.
  const accepted = Array.from({ length: 2 + MAX_WAITING }, () =>
    verifyPassword('a long and quiet password', stored),
  );
  await t.rejects(verifyPassword('a long and quiet password', stored), PasswordChecksBusy);
  t.same(await Promise.all(accepted), Array(2 + MAX_WAITING).fill(true), 'the ones that waited are answered');
  t.ok(await verifyPassword('a long and quiet password', stored), 'and the queue takes checks again');
});
