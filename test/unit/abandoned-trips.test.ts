import t from 'tap';
import { revokePriority } from '../../src/links/consent/revocations.js';
import { tripConsentId } from '../../src/widget/consent/abandoned-trips.js';

// Which trips leave a consent at the bank, and how their revoke ranks against the syncs (widget/consent/abandoned-trips.ts).

t.test(
  "a trip's consent at the bank: a Brazilian trip's details name it, a Chilean trip's none",
  async (t) => {
    const brazil = [{ type: 'Accounts', actions: ['ReadAccountsBasic'], identifier: 'urn:bank:c1' }];
    t.equal(tripConsentId({ authorization_details: JSON.stringify(brazil) }), 'urn:bank:c1');
    const chile = [{ type: 'Accounts', actions: ['ReadAccountsBasic'], validTo: '2027-01-01T00:00:00.000Z' }];
    t.equal(tripConsentId({ authorization_details: JSON.stringify(chile) }), null);
    for (const text of ['[]', '{}', 'null', 'not json', '[{"identifier":""}]', '[{"identifier":7}]'])
      t.equal(tripConsentId({ authorization_details: text }), null, text);
  },
);

t.test("a consent no link holds is revoked in the background, a link's at the scheduled share", async (t) => {
  t.equal(revokePriority({ link_id: 'wcr_0123456789abcdef' }), 'background');
  t.equal(revokePriority({ link_id: 'link_0123456789abcdef' }), 'scheduled');
});
