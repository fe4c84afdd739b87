import t from 'tap';
import { shareGrant, spareTokensToTake, take, type BucketState } from '../../src/ratelimit/token-bucket.js';

const READ = { perMinute: 100, burst: 20 };
const START = Date.UTC(2026, 0, 15, 12, 0, 0);

/** Takes `count` tokens at one instant and returns every decision. */
function burst(state: BucketState | undefined, count: number, now: number) {
  const decisions = [];
  for (let i = 0; i < count; i++) {
    const decision = take(state, READ, now);
    state = decision.state;
    decisions.push(decision);
  }
  return decisions;
}

t.test('a fresh bucket allows the whole burst at once and refuses the next request', async (t) => {
  const decisions = burst(undefined, 21, START);
  t.same(
    decisions.slice(0, 20).map((d) => d.allowed),
    Array(20).fill(true),
    'the first 20 are allowed',
  );
  t.same(
    decisions.slice(0, 20).map((d) => d.remaining),
    [19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
    'remaining counts down to zero',
  );
  const refused = decisions[20]!;
  t.equal(refused.allowed, false, 'the 21st is refused');
  t.equal(refused.remaining, 0);
  t.equal(refused.limit, 100, 'limit reports requests per minute');
  t.equal(decisions[0]!.retryAfter, 0, 'an allowed request has no Retry-After');
});

t.test('the bucket refills at perMinute/60 tokens per second', async (t) => {
  let state = burst(undefined, 20, START).at(-1)!.state;
  // 100/min is one token every 600 ms.
  const early = take(state, READ, START + 599);
  t.equal(early.allowed, false, 'not yet a whole token after 599 ms');
  state = early.state;
  const onTime = take(state, READ, START + 600);
  t.equal(onTime.allowed, true, 'one token after 600 ms');
  t.equal(onTime.remaining, 0);
  t.equal(take(onTime.state, READ, START + 600).allowed, false, 'and only one');

  const perSecond = { perMinute: 60, burst: 5 };
  let s = take(undefined, perSecond, START).state;
  for (let i = 0; i < 4; i++) s = take(s, perSecond, START).state;
  t.equal(take(s, perSecond, START).allowed, false, 'a 60/min bucket is empty after its burst of 5');
  const afterThree = take(s, perSecond, START + 3000);
  t.equal(afterThree.allowed, true, '60/min refills one token per second');
  t.equal(afterThree.remaining, 2, 'three seconds gave three tokens, one of them spent');
});

t.test('a long pause refills to the burst and no further', async (t) => {
  const state = burst(undefined, 20, START).at(-1)!.state;
  const decisions = burst(state, 21, START + 10 * 60_000);
  t.equal(decisions.filter((d) => d.allowed).length, 20, 'ten idle minutes give back exactly the burst');
  t.equal(decisions[0]!.remaining, 19);
});

t.test('resetAt is the Unix second at which the bucket is full again', async (t) => {
  const first = take(undefined, READ, START);
  // One token spent; 600 ms to refill it.
  t.equal(first.resetAt, Math.ceil((START + 600) / 1000));
  const empty = burst(undefined, 20, START).at(-1)!;
  // Twenty tokens at 600 ms each: 12 s.
  t.equal(empty.resetAt, Math.ceil((START + 12_000) / 1000));
  t.ok(empty.resetAt > START / 1000 && empty.resetAt < START / 1000 + 60, 'in seconds, not milliseconds');
});

t.test('retryAfter is the whole seconds until one token is back, at least 1', async (t) => {
  const state = burst(undefined, 20, START).at(-1)!.state;
  const refused = take(state, READ, START);
  t.equal(refused.retryAfter, 1, '600 ms rounds up to 1 s');

  const slow = { perMinute: 10, burst: 5 };
  let s = take(undefined, slow, START).state;
  for (let i = 0; i < 4; i++) s = take(s, slow, START).state;
  const slowRefused = take(s, slow, START);
  t.equal(slowRefused.allowed, false);
  t.equal(slowRefused.retryAfter, 6, '10/min is one token every 6 s');
  const partWay = take(slowRefused.state, slow, START + 2500);
  t.equal(partWay.allowed, false);
  t.equal(partWay.retryAfter, 4, '3.5 s left rounds up to 4');
  t.equal(
    take(partWay.state, slow, START + 2500 + partWay.retryAfter * 1000).allowed,
    true,
    'waiting Retry-After seconds is enough',
  );
});

t.test('a refused request does not spend a token', async (t) => {
  let state = burst(undefined, 20, START).at(-1)!.state;
  for (let i = 0; i < 5; i++) state = take(state, READ, START + 300).state;
  t.equal(take(state, READ, START + 600).allowed, true, 'refusals at 300 ms did not delay the refill');
});

t.test(
  'a grant charged for several requests at once reads as if they had been charged one by one',
  async (t) => {
    const afterThree = burst(undefined, 3, START).at(-1)!.state;
    const one = burst(afterThree, 5, START);
    // 17 tokens were left; a grant of 5 leaves 12.
    const shared = shareGrant(5, { tokens: 12, updatedAt: START }, 5, READ);
    t.same(
      shared.map((d) => [d.allowed, d.remaining, d.resetAt]),
      one.map((d) => [d.allowed, d.remaining, d.resetAt]),
    );
  },
);

t.test('requests beyond a partial grant are refused with the bucket as the grant left it', async (t) => {
  const decisions = shareGrant(2, { tokens: 0.4, updatedAt: START }, 5, READ);
  t.same(
    decisions.map((d) => d.allowed),
    [true, true, false, false, false],
  );
  t.same(
    decisions.map((d) => d.remaining),
    [1, 0, 0, 0, 0],
  );
  t.equal(decisions[4]!.retryAfter, 1, '0.6 tokens at 100/min is 360 ms away: 1 s');
  t.same(shareGrant(0, { tokens: 0, updatedAt: START }, 0, READ), [], 'an empty batch decides nothing');
});

t.test(
  'spare tokens: only from a large bucket known to be more than half full, 0.1% of its burst',
  async (t) => {
    const big = { perMinute: 60_000, burst: 50_000 };
    t.equal(spareTokensToTake(undefined, big), 0, 'none before the bucket has been read once');
    t.equal(spareTokensToTake({ tokens: 25_001, updatedAt: START }, big), 50, 'more than half full: 0.1%');
    t.equal(spareTokensToTake({ tokens: 25_000, updatedAt: START }, big), 0, 'half full or less: none');
    t.equal(spareTokensToTake({ tokens: 19, updatedAt: START }, READ), 0, 'a burst under 1,000: none');
    t.equal(
      spareTokensToTake({ tokens: 1_000_000, updatedAt: START }, { perMinute: 1e8, burst: 1_000_000 }),
      100,
      'never more than 100',
    );
  },
);
