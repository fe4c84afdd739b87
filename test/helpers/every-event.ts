import type { Test } from 'tap';
import { linkBody, runSyncs, schedulerTick, type TestApp } from './harness.js';

const HOUR = 3_600_000;

/** The links `causeEveryEventType` made, by what happened to them. */
export interface EventfulLinks {
  /** Created, synced three times (its Cuenta Vista disappears on the third), deleted. */
  healthy: string;
  /** Its bank accepts the first sync only: rejected three times, it expires. */
  expiring: string;
  /** Rejected credentials: the first sync's intent fails. */
  rejected: string;
  /** The bank asks for a code during an on-demand refresh, which then waits for it. */
  mfa: string;
  /** The on-demand refresh intent of the mfa link. */
  mfaIntent: string;
}

/** Causes each type of the event catalogue through the flow that causes it, in one tenant's test mode. */
export async function causeEveryEventType(t: Test, app: TestApp, key: string): Promise<EventfulLinks> {
  const create = async (rut: string, password: string) => {
    const response = await app.request('POST', '/v1/links', {
      key,
      body: linkBody({ credentials: { rut, password } }),
    });
    t.equal(response.status, 200);
    return response.body.id as string;
  };
  const tick = async () => {
    app.clock.advance(4 * HOUR + 60_000);
    await schedulerTick(app);
  };

  const healthy = await create('11.111.111-1', 'sandbox');
  await runSyncs(app);
  await tick();
  await tick();
  const expiring = await create('44.444.444-4', 'sandbox-expiring');
  await runSyncs(app);
  for (let i = 0; i < 3; i++) await tick();
  const rejected = await create('55.555.555-5', 'sandbox-rejected');
  await runSyncs(app);
  t.equal((await app.request('DELETE', `/v1/links/${healthy}`, { key })).status, 200);
  const mfa = await create('22.222.222-2', 'sandbox-mfa');
  await runSyncs(app);
  const intent = await app.request('POST', '/v1/refresh_intents', { key, body: { link_id: mfa } });
  t.equal(intent.status, 200);
  await runSyncs(app);
  return { healthy, expiring, rejected, mfa, mfaIntent: intent.body.id as string };
}
