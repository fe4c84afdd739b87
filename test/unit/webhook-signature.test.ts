import { createHmac } from 'node:crypto';
import t from 'tap';
import { verifySignature } from '../../src/index.js';
import { signatureHeader } from '../../src/webhooks/signature.js';

const secret = 'whsec_test_0123456789abcdefghijklmnopqrstuv';
const other = 'whsec_other_0123456789abcdefghijklmnopqrstu';
const body = JSON.stringify({ object: 'event', id: 'evt_0123456789abcdef', type: 'link.created', data: {} });
const NOW = Date.UTC(2026, 5, 15, 15, 0, 0);
const t0 = Math.floor(NOW / 1000);

/** Written here from the spec, not with the project's code. */
function hmac(key: string, timestamp: number, payload: string): string {
  return createHmac('sha256', key).update(`${timestamp}.${payload}`).digest('hex');
}

t.test('the header the dispatcher writes is the spec: t=<unix>,v1=<hex> over "<t>.<body>"', async (t) => {
  t.equal(signatureHeader([secret], t0, body), `t=${t0},v1=${hmac(secret, t0, body)}`);
  t.equal(
    signatureHeader([secret, other], t0, body),
    `t=${t0},v1=${hmac(secret, t0, body)},v1=${hmac(other, t0, body)}`,
    'one v1 per active secret',
  );
});

t.test('a good signature verifies, as text or bytes, with a Date or a number for now', async (t) => {
  const header = `t=${t0},v1=${hmac(secret, t0, body)}`;
  t.ok(verifySignature(body, header, secret, { now: NOW }));
  t.ok(verifySignature(Buffer.from(body), header, secret, { now: new Date(NOW) }));
  t.ok(verifySignature(body, ` t=${t0} , v1=${hmac(secret, t0, body).toUpperCase()} `, secret, { now: NOW }));
});

t.test('a tampered body, a wrong secret or a changed timestamp fails', async (t) => {
  const header = `t=${t0},v1=${hmac(secret, t0, body)}`;
  t.notOk(verifySignature(body.replace('link.created', 'link.deleted'), header, secret, { now: NOW }));
  t.notOk(verifySignature(body + ' ', header, secret, { now: NOW }), 'one byte more');
  t.notOk(verifySignature(body, header, other, { now: NOW }), 'wrong secret');
  t.notOk(verifySignature(body, header.replace(`t=${t0}`, `t=${t0 + 1}`), secret, { now: NOW }));
});

t.test('the timestamp must be within the tolerance, in either direction', async (t) => {
  for (const [offset, ok] of [
    [0, true],
    [-300, true],
    [300, true],
    [-301, false],
    [301, false],
    [-86_400, false],
    [86_400, false],
  ] as const) {
    const ts = t0 + offset;
    const header = `t=${ts},v1=${hmac(secret, ts, body)}`;
    t.equal(verifySignature(body, header, secret, { now: NOW }), ok, `signed ${offset} s from now`);
  }
  const old = t0 - 1000;
  const header = `t=${old},v1=${hmac(secret, old, body)}`;
  t.ok(verifySignature(body, header, secret, { now: NOW, toleranceSeconds: 1000 }), 'a wider tolerance');
  t.notOk(verifySignature(body, header, secret, { now: NOW, toleranceSeconds: 999 }));
  const fresh = Math.floor(Date.now() / 1000);
  t.ok(
    verifySignature(body, `t=${fresh},v1=${hmac(secret, fresh, body)}`, secret),
    'now defaults to the clock',
  );
});

t.test('any of several v1 values may match; other schemes are ignored', async (t) => {
  const good = hmac(secret, t0, body);
  const wrong = hmac(other, t0, body);
  t.ok(verifySignature(body, `t=${t0},v1=${wrong},v1=${good}`, secret, { now: NOW }));
  t.ok(verifySignature(body, `t=${t0},v1=${good},v1=${wrong}`, secret, { now: NOW }));
  t.ok(verifySignature(body, `t=${t0},v0=zzz,v1=${good},v2=abc`, secret, { now: NOW }));
  t.notOk(verifySignature(body, `t=${t0},v1=${wrong},v1=${wrong}`, secret, { now: NOW }));
});

t.test('malformed headers fail without throwing', async (t) => {
  const good = hmac(secret, t0, body);
  for (const header of [
    undefined,
    null,
    '',
    'garbage',
    `v1=${good}`,
    `t=${t0}`,
    `t=abc,v1=${good}`,
    `t=${t0},v1=`,
    `t=${t0},v1=${good.slice(0, 63)}`,
    `t=${t0},v1=${good}00`,
    `t=${t0},v1=${'g'.repeat(64)}`,
    `t=-${t0},v1=${good}`,
  ]) {
    t.notOk(verifySignature(body, header, secret, { now: NOW }), String(header));
  }
  t.notOk(verifySignature(body, `t=${t0},v1=${good}`, '', { now: NOW }), 'an empty secret never verifies');
});
