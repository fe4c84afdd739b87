import t from 'tap';
import { defaultConfig } from '../../src/config/defaults.js';
import { effectiveLimits, parseRateLimitOverrides } from '../../src/ratelimit/overrides.js';

const defaults = defaultConfig('/tmp/unused').rateLimits;

t.test('a limit without a burst keeps the default ratio of burst to limit', async (t) => {
  t.same(parseRateLimitOverrides(['read=1000'], defaults), { read: { perMinute: 1000, burst: 200 } });
  t.same(parseRateLimitOverrides(['sync_write=20'], defaults), { sync_write: { perMinute: 20, burst: 10 } });
  t.same(
    parseRateLimitOverrides(['read=1'], defaults),
    { read: { perMinute: 1, burst: 1 } },
    'the burst never rounds down to zero',
  );
});

t.test('an explicit burst is kept', async (t) => {
  t.same(parseRateLimitOverrides(['read=1000:50'], defaults), { read: { perMinute: 1000, burst: 50 } });
});

t.test('several groups at once', async (t) => {
  t.same(parseRateLimitOverrides(['read=1000:50', ' widget_tokens=60 '], defaults), {
    read: { perMinute: 1000, burst: 50 },
    widget_tokens: { perMinute: 60, burst: 20 },
  });
});

t.test('an unknown group is refused with the list of groups', async (t) => {
  t.throws(() => parseRateLimitOverrides(['reads=1000'], defaults), {
    message:
      /Unknown rate-limit group "reads".*read, sync_write, widget_tokens, resource_write, webhook_deliveries/,
  });
});

t.test('bad syntax is refused with the expected form', async (t) => {
  for (const item of [
    'read',
    'read=',
    'read:1000',
    'read=fast',
    'read=10:',
    'read=-5',
    'read=1.5',
    'READ=10',
  ])
    t.throws(
      () => parseRateLimitOverrides([item], defaults),
      { message: /must look like group=perMinute or group=perMinute:burst/ },
      `"${item}"`,
    );
});

t.test('zero is refused', async (t) => {
  t.throws(() => parseRateLimitOverrides(['read=0'], defaults), { message: /at least 1 per minute/ });
  t.throws(() => parseRateLimitOverrides(['read=100:0'], defaults), { message: /burst of at least 1/ });
});

t.test('overrides replace only the groups they name', async (t) => {
  const limits = effectiveLimits(defaults, { read: { perMinute: 1000, burst: 200 } });
  t.same(limits.read, { perMinute: 1000, burst: 200 });
  t.same(limits.sync_write, { perMinute: 10, burst: 5 });
  t.same(effectiveLimits(defaults, null), defaults);
});
