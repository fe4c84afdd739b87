import t from 'tap';
import { defaultConfig } from '../../src/config/defaults.js';
import {
  backoffDelayMs,
  backoffUntil,
  healthChanges,
  KnownHealth,
} from '../../src/webhooks/dispatch/endpoint-health.js';

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

t.test(
  "a process's knowledge: one attempt at a time while unanswered, none once backed off, all on a 2xx",
  async (t) => {
    const known = new KnownHealth({ perEndpointConcurrency: 4, backoffAfterUnanswered: 3 }, 100);
    t.equal(known.limit('we_a'), 4);
    known.attempted({ endpointId: 'we_a', ok: false, unanswered: false });
    t.equal(known.limit('we_a'), 4, 'an error answer changes nothing');
    known.attempted({ endpointId: 'we_a', ok: false, unanswered: true });
    t.equal(known.limit('we_a'), 1);
    known.attempted({ endpointId: 'we_a', ok: false, unanswered: true });
    known.attempted({ endpointId: 'we_a', ok: false, unanswered: true });
    t.equal(known.limit('we_a'), 0, 'at the threshold');
    t.ok(known.anyBackedOff() && known.isBackedOff('we_a'));
    known.attempted({ endpointId: 'we_a', ok: true, unanswered: false });
    t.equal(known.limit('we_a'), 4);
    t.notOk(known.anyBackedOff());
  },
);

t.test('a claim says what the database knows: its count, and that the endpoint is claimable', async (t) => {
  const known = new KnownHealth({ perEndpointConcurrency: 4, backoffAfterUnanswered: 3 }, 2);
  known.backOff('we_a');
  known.claimed([
    { endpoint_id: 'we_a', endpoint_unanswered: 3 },
    { endpoint_id: 'we_b', endpoint_unanswered: 0 },
  ]);
  t.equal(known.limit('we_a'), 1, 'no longer backed off, still unanswered');
  t.equal(known.limit('we_b'), 4);
  known.claimed([{ endpoint_id: 'we_a', endpoint_unanswered: null }]);
  t.equal(known.limit('we_a'), 4, 'a count of 0');
  for (const id of ['we_c', 'we_d', 'we_e']) known.backOff(id);
  known.claimed([]);
  t.notOk(known.anyBackedOff(), 'past its bound it starts again');
});
