import t from 'tap';
import { parseDuration } from '../../src/cli/base-command.js';

t.test('durations in seconds, minutes, hours and days', async (t) => {
  t.equal(parseDuration('90s'), 90);
  t.equal(parseDuration('30m'), 1800);
  t.equal(parseDuration('24h'), 86_400);
  t.equal(parseDuration('7d'), 604_800);
  t.equal(parseDuration('45'), 45, 'a bare number is seconds');
  t.equal(parseDuration('0'), 0, 'zero ends a grace period at once');
  t.equal(parseDuration(' 5 m '), 300, 'spaces are tolerated');
});

t.test('anything else is refused with an example', async (t) => {
  for (const text of ['', 'abc', '1.5h', '-5s', '5x', '5 hours', 'h'])
    t.throws(
      () => parseDuration(text),
      { message: /is not a duration; use e\.g\. 90s, 30m, 24h or 7d/ },
      `"${text}"`,
    );
});
