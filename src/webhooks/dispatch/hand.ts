import type { Config } from '../../config/defaults.js';
import { overMark, startable, type Keyed } from './fair-share.js';
import type { Busy } from './queue.js';

/**
 * Rows kept in hand, in sets of the concurrency (overall, and per endpoint): one set in flight, the rest
 * queued. A claim is made once a set has gone out, and it may have to wait for the cycle running before
 * its own, so the queue must outlast two cycles: how many sets that takes follows the pace (see `adapt`),
 * between these bounds.
 */
const MIN_SETS = 4;
const MAX_SETS = 16;

/** Weight of the latest cycle or attempt in the running averages of the pace. */
const PACE_WEIGHT = 0.25;

/** A running average that starts at its first sample: started at zero, it took a dozen cycles to reach the pace. */
function follow(average: number, sample: number): number {
  return average === 0 ? sample : average + PACE_WEIGHT * (sample - average);
}

export type HandSettings = Pick<
  Config['dispatcher'],
  'concurrency' | 'perEndpointConcurrency' | 'perOrganisationConcurrency'
>;

/**
 * The rows a dispatcher holds, claimed and not yet finished: queued, or in flight. It keeps the counts that
 * fair-share.ts judges (overall, by endpoint and by organisation, in flight and in hand), says how much a
 * claim may take and which endpoints and organisations it must skip, and starts queued rows as slots allow.
 * `endpointLimit` is an endpoint's own limit of attempts in flight (endpoint-health.ts).
 *
 * Isolation and fairness: at most `concurrency` attempts in flight, at most `perOrganisationConcurrency` of
 * them for one organisation and at most `perEndpointConcurrency` to one endpoint, and at most as many sets of
 * each in hand as overall. Claims skip endpoints and organisations at that mark, so a backlog of one, however
 * old, cannot fill the hand, and the queue starts the oldest rows that fit their limits, so rows held back by
 * their organisation's share do not hold up anyone else's. Before the organisation's share, one organisation
 * with 40 endpoints that took requests and never answered held all 32 slots, and every other organisation
 * waited 23 to 59 s (normally under 0.3 s) behind their 10 s deadlines; now it holds 8 and the other 24 keep
 * flowing. The shares are per process: with several dispatchers an organisation holds at most its share of
 * each, the same fraction of the whole.
 */
export class Hand<R extends Keyed> {
  /** Claimed rows waiting for a slot, oldest first. */
  private queue: R[] = [];
  /** HTTP exchanges in flight, overall, by endpoint and by organisation. */
  private active = 0;
  private readonly perEndpoint = new Map<string, number>();
  private readonly perOrganisation = new Map<string, number>();
  /** How many of each endpoint and organisation are in hand (queued or in flight). */
  private readonly inHand = new Map<string, number>();
  private readonly organisationInHand = new Map<string, number>();
  /** Sets of the concurrency kept in hand, and the pace they follow: how long cycles and attempts take. */
  private sets = MIN_SETS;
  private readonly pace = { cycleMs: 0, attemptMs: 0 };

  constructor(
    private readonly settings: HandSettings,
    private readonly endpointLimit: (endpointId: string) => number,
  ) {}

  /** Rows in hand: in flight or queued. */
  held(): number {
    return this.active + this.queue.length;
  }

  /** Room for a claim: nothing in hand, or a set's worth gone out. */
  roomToClaim(): boolean {
    const held = this.held();
    return held === 0 || this.sets * this.settings.concurrency - held >= this.settings.concurrency;
  }

  /** How many rows of one endpoint may be in hand before claims skip it: a set short of its share. */
  private endpointMark(endpointId: string): number {
    return (this.sets - 1) * this.endpointLimit(endpointId);
  }

  /** The same for an organisation. */
  private organisationMark(): number {
    return (this.sets - 1) * this.settings.perOrganisationConcurrency;
  }

  /** Endpoints and organisations with less than a set of room; every other has room for a whole batch. */
  busy(): Busy {
    return {
      endpoints: overMark(this.inHand, (id) => this.endpointMark(id)),
      organisations: overMark(this.organisationInHand, () => this.organisationMark()),
    };
  }

  /**
   * How many rows a claim skipping `busy` may take: as many as fit overall, and for the fullest endpoint and
   * the fullest organisation that may come back (any endpoint or organisation not skipped may fill the whole
   * batch).
   */
  claimLimit(busy: Busy): number {
    const { concurrency, perEndpointConcurrency, perOrganisationConcurrency } = this.settings;
    const fullest = (counts: Map<string, number>, skipped: string[]) =>
      Math.max(0, ...[...counts].filter(([id]) => !skipped.includes(id)).map(([, n]) => n));
    return Math.min(
      this.sets * concurrency - this.held(),
      this.sets * perEndpointConcurrency - fullest(this.inHand, busy.endpoints),
      this.sets * perOrganisationConcurrency - fullest(this.organisationInHand, busy.organisations),
    );
  }

  /** Whether a finished row's endpoint or organisation, skipped by claims while at its mark, is at it now. */
  atMark({ endpointId, orgId }: Keyed): boolean {
    return (
      (this.inHand.get(endpointId) ?? 0) === this.endpointMark(endpointId) ||
      (this.organisationInHand.get(orgId) ?? 0) === this.organisationMark()
    );
  }

  /** Queues a claimed row, unless its endpoint or organisation already has its share in hand. */
  admit(item: R): boolean {
    const inHand = this.inHand.get(item.endpointId) ?? 0;
    const organisationInHand = this.organisationInHand.get(item.orgId) ?? 0;
    if (
      inHand >= this.sets * this.endpointLimit(item.endpointId) ||
      organisationInHand >= this.sets * this.settings.perOrganisationConcurrency
    )
      return false;
    this.inHand.set(item.endpointId, inHand + 1);
    this.organisationInHand.set(item.orgId, organisationInHand + 1);
    this.queue.push(item);
    return true;
  }

  /**
   * Takes the queued rows to start now, oldest first, while slots are free and their endpoints and
   * organisations are under their limits (fair-share.ts), and counts them in flight.
   */
  start(): R[] {
    if (this.queue.length === 0 || this.active >= this.settings.concurrency) return [];
    const picked = startable(
      this.queue,
      { total: this.active, byEndpoint: this.perEndpoint, byOrganisation: this.perOrganisation },
      {
        concurrency: this.settings.concurrency,
        perOrganisation: this.settings.perOrganisationConcurrency,
        endpoint: this.endpointLimit,
      },
    );
    if (picked.length === 0) return [];
    const chosen = new Set(picked);
    const starting = picked.map((i) => this.queue[i]!);
    this.queue = this.queue.filter((_, i) => !chosen.has(i));
    for (const item of starting) {
      this.active += 1;
      increment(this.perEndpoint, item.endpointId);
      increment(this.perOrganisation, item.orgId);
    }
    return starting;
  }

  /** A started row is finished: its slot and its place in hand are free. */
  finish(item: Keyed, attemptMs: number): void {
    this.active -= 1;
    decrement(this.perEndpoint, item.endpointId);
    decrement(this.perOrganisation, item.orgId);
    this.forget(item);
    this.pace.attemptMs = follow(this.pace.attemptMs, attemptMs);
  }

  /** Takes out of the queue the rows `which` picks (to give them back), and returns them. */
  takeQueued(which: (item: R) => boolean): R[] {
    const taken: R[] = [];
    const kept: R[] = [];
    for (const item of this.queue) (which(item) ? taken : kept).push(item);
    if (taken.length === 0) return taken;
    this.queue = kept;
    for (const item of taken) this.forget(item);
    return taken;
  }

  private forget({ endpointId, orgId }: Keyed): void {
    decrement(this.inHand, endpointId);
    decrement(this.organisationInHand, orgId);
  }

  /**
   * Follows the pace. A claim is called when a set of room has gone out, and its rows arrive after the cycle
   * before it and its own: while those two run, each slot finishes cycleMs / attemptMs attempts, so that many
   * sets, twice, must be queued beyond the set in flight and the set of room. Measured from the attempts'
   * own time rather than the rate achieved, which a short queue holds down: so a backlog reaches full speed
   * in a cycle or two, and slow receivers keep the minimum in hand.
   */
  adapt(cycleMs: number): void {
    const { pace } = this;
    pace.cycleMs = follow(pace.cycleMs, cycleMs);
    if (pace.attemptMs === 0) return;
    const wanted = Math.min(MAX_SETS, Math.max(MIN_SETS, 2 + Math.ceil((2 * pace.cycleMs) / pace.attemptMs)));
    // Up at once, down by a set a cycle: a pace that jitters must not drain the queue.
    this.sets = Math.max(wanted, this.sets - 1);
  }
}

function increment(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}
