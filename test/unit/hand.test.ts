import t from 'tap';
import { Hand } from '../../src/webhooks/dispatch/hand.js';

const SETTINGS = { concurrency: 4, perEndpointConcurrency: 2, perOrganisationConcurrency: 3 };
const row = (orgId: string, endpointId: string, n = 0) => ({ orgId, endpointId, n });

function hand(limit: (id: string) => number = () => SETTINGS.perEndpointConcurrency) {
  return new Hand<ReturnType<typeof row>>(SETTINGS, limit);
}

t.test('an empty hand has room for a claim of its sets of the concurrency, skipping nobody', async (t) => {
  const h = hand();
  t.ok(h.roomToClaim());
  t.same(h.busy(), { endpoints: [], organisations: [] });
  // 4 sets (the minimum) of each: overall 16, an endpoint 8, an organisation 12.
  t.equal(h.claimLimit(h.busy()), 8);
});

t.test('rows start oldest first within the limits; finishing frees their slot', async (t) => {
  const h = hand();
  for (let i = 0; i < 6; i++) t.ok(h.admit(row('org_a', `we_${i % 2}`, i)));
  t.equal(h.held(), 6);
  const started = h.start();
  t.same(
    started.map((r) => r.n),
    [0, 1, 2],
    "the organisation's share of 3 in flight",
  );
  t.same(h.start(), [], 'nothing more until one finishes');
  h.finish(started[0]!, 5);
  t.same(
    h.start().map((r) => r.n),
    [3],
  );
  t.equal(h.held(), 5);
});

t.test("admission stops at an endpoint's or an organisation's sets in hand", async (t) => {
  const h = hand();
  let admitted = 0;
  for (let i = 0; i < 20; i++) if (h.admit(row('org_a', 'we_a', i))) admitted += 1;
  t.equal(admitted, 8, "4 sets of the endpoint's 2");
  t.same(h.busy().endpoints, ['we_a'], 'claims skip it');
  t.ok(h.admit(row('org_a', 'we_b')));
  t.same(h.busy().organisations, [], 'the organisation has 9 of 12: not over its mark of 9');
  t.ok(h.admit(row('org_a', 'we_b')));
  t.same(h.busy().organisations, ['org_a']);
});

t.test("an endpoint's own limit holds: none in flight while it is backed off", async (t) => {
  const h = hand((id) => (id === 'we_off' ? 0 : 2));
  t.notOk(h.admit(row('org_a', 'we_off')), 'not even admitted');
  t.ok(h.admit(row('org_a', 'we_on')));
  t.same(
    h.start().map((r) => r.endpointId),
    ['we_on'],
  );
});

t.test('queued rows taken out are forgotten: their endpoint and organisation have room again', async (t) => {
  const h = hand();
  for (let i = 0; i < 8; i++) h.admit(row('org_a', 'we_a', i));
  h.admit(row('org_b', 'we_b', 99));
  const taken = h.takeQueued((r) => r.endpointId === 'we_a');
  t.equal(taken.length, 8);
  t.same(h.busy(), { endpoints: [], organisations: [] });
  t.equal(h.held(), 1);
});

t.test('the hand grows with the pace: slow cycles against quick attempts keep more sets', async (t) => {
  const h = hand();
  const r = row('org_a', 'we_a');
  h.admit(r);
  h.start();
  h.finish(r, 1);
  h.adapt(10);
  // 2 + ceil(2 * 10 / 1) sets, at most 16: overall 64, an endpoint 32.
  t.equal(h.claimLimit(h.busy()), 32);
  // Attempts slow down (a running average: 1 ms, then 1,000 ms weighs in at a quarter).
  h.admit(r);
  h.start();
  h.finish(r, 1000);
  h.adapt(0.1);
  t.equal(h.claimLimit(h.busy()), 30, 'down by a set a cycle, not at once to the minimum');
});
