import t from 'tap';
import { overMark, startable, type Keyed, type ShareLimits } from '../../src/webhooks/dispatch/fair-share.js';

const LIMITS: ShareLimits = { concurrency: 6, perOrganisation: 3, endpoint: () => 2 };
const none = { total: 0, byEndpoint: new Map(), byOrganisation: new Map() };
const row = (orgId: string, endpointId: string): Keyed => ({ orgId, endpointId });

t.test(
  "an organisation's backlog, queued first, takes its share and leaves the rest to others",
  async (t) => {
    // Organisation B: 20 rows over 10 endpoints, oldest; then organisation A's one row.
    const queue = [
      ...Array.from({ length: 20 }, (_, i) => row('org_b', `we_b${i % 10}`)),
      row('org_a', 'we_a'),
    ];
    const picked = startable(queue, none, LIMITS);
    t.same(picked, [0, 1, 2, 20], "three of B's (its share), then A's");
  },
);

t.test('limits count what is already in flight', async (t) => {
  const queue = [row('org_b', 'we_b0'), row('org_a', 'we_a'), row('org_a', 'we_a'), row('org_c', 'we_c')];
  const inFlight = {
    total: 5,
    byEndpoint: new Map([['we_a', 1]]),
    byOrganisation: new Map([
      ['org_b', 3],
      ['org_a', 1],
    ]),
  };
  t.same(startable(queue, inFlight, LIMITS), [1], 'one slot left: B is at its share, so A gets it');
  t.same(startable(queue, { ...inFlight, total: 6 }, LIMITS), [], 'no slot left');
});

t.test("an endpoint's own limit: 0 while backed off, 1 while going unanswered", async (t) => {
  const limits: ShareLimits = {
    ...LIMITS,
    endpoint: (id) => ({ we_off: 0, we_failing: 1 })[id] ?? 2,
  };
  const queue = [
    row('org_a', 'we_off'),
    row('org_a', 'we_failing'),
    row('org_a', 'we_failing'),
    row('org_b', 'we_ok'),
    row('org_b', 'we_ok'),
    row('org_b', 'we_ok'),
  ];
  t.same(startable(queue, none, limits), [1, 3, 4]);
});

t.test('claims skip the keys over their mark', async (t) => {
  const inHand = new Map([
    ['org_a', 4],
    ['org_b', 9],
    ['org_c', 8],
  ]);
  t.same(
    overMark(inHand, () => 8),
    ['org_b'],
  );
  t.same(
    overMark(inHand, (key) => (key === 'org_a' ? 3 : 100)),
    ['org_a'],
  );
});
