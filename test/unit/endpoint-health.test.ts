import t from 'tap';
import { defaultConfig } from '../../src/config/defaults.js';
import { backoffDelayMs, backoffUntil, healthChanges } from '../../src/webhooks/endpoint-health.js';

const SETTINGS = { backoffAfterUnanswered: 5, backoffInitialSeconds: 30, backoffMaxSeconds: 3600 };
const NOW = Date.UTC(2026, 5, 15, 15, 0, 0);

t.test('the defaults are those the docs give: 5 in a row, 30 s doubling, at most 1 h', async (t) => {
  const { backoffAfterUnanswered, backoffInitialSeconds, backoffMaxSeconds } =
    defaultConfig('/tmp').dispatcher;
  t.same({ backoffAfterUnanswered, backoffInitialSeconds, backoffMaxSeconds }, SETTINGS);
});

t.test(
  'no back-off below the threshold; from it, doubling per unanswered attempt up to the cap',
  async (t) => {
    t.same(
      [0, 1, 4].map((n) => backoffDelayMs(n, SETTINGS)),
      [0, 0, 0],
    );
    t.same(
      [5, 6, 7, 8, 9, 10, 11, 12, 13].map((n) => backoffDelayMs(n, SETTINGS) / 1000),
      [30, 60, 120, 240, 480, 960, 1920, 3600, 3600],
    );
    t.equal(backoffDelayMs(1_000_000, SETTINGS), 3_600_000, 'a huge count stays at the cap, finite');
    t.equal(backoffDelayMs(1, { ...SETTINGS, backoffAfterUnanswered: 1, backoffInitialSeconds: 0.5 }), 500);
  },
);

t.test('a back-off ends after its delay from the record, and never earlier than one running', async (t) => {
  t.equal(backoffUntil(4, null, NOW, SETTINGS), null, 'under the threshold');
  t.equal(backoffUntil(5, null, NOW, SETTINGS), NOW + 30_000);
  t.equal(backoffUntil(6, NOW + 30_000, NOW + 1000, SETTINGS), NOW + 61_000, 'lengthened');
  t.equal(backoffUntil(5, NOW + 600_000, NOW, SETTINGS), NOW + 600_000, 'a longer one is kept');
});

t.test(
  'a batch counts unanswered attempts after its last success; error answers change nothing',
  async (t) => {
    const attempt = (endpointId: string, outcome: 'ok' | 'unanswered' | 'error') => ({
      endpointId,
      ok: outcome === 'ok',
      unanswered: outcome === 'unanswered',
    });
    t.same(
      healthChanges([
        attempt('we_a', 'unanswered'),
        attempt('we_a', 'unanswered'),
        attempt('we_b', 'unanswered'),
        attempt('we_a', 'ok'),
        attempt('we_a', 'unanswered'),
        attempt('we_b', 'error'),
        attempt('we_c', 'error'),
        attempt('we_d', 'ok'),
      ]),
      [
        { endpointId: 'we_a', reset: true, added: 1 },
        { endpointId: 'we_b', reset: false, added: 1 },
        { endpointId: 'we_d', reset: true, added: 0 },
      ],
    );
    t.same(healthChanges([]), []);
  },
);
