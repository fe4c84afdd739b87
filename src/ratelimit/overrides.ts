import { RATE_GROUPS, type RateGroup, type RateLimit } from '../config/defaults.js';

export type RateLimitOverrides = Partial<Record<RateGroup, RateLimit>>;

/**
 * Parses `group=perMinute[:burst]` items (`read=1000`, `sync_write=60:20`). Without a burst, the burst
 * keeps the default's ratio to the limit (100/min with 20 → 1000/min with 200).
 */
export function parseRateLimitOverrides(
  items: string[],
  defaults: Record<RateGroup, RateLimit>,
): RateLimitOverrides {
  const overrides: RateLimitOverrides = {};
  for (const item of items) {
    const match = /^([a-z_]+)=(\d+)(?::(\d+))?$/.exec(item.trim());
    if (!match)
      throw new Error(`Rate limit "${item}" must look like group=perMinute or group=perMinute:burst.`);
    const [, group, perMinuteText, burstText] = match as unknown as [
      string,
      string,
      string,
      string | undefined,
    ];
    if (!(RATE_GROUPS as readonly string[]).includes(group)) {
      throw new Error(`Unknown rate-limit group "${group}"; the groups are ${RATE_GROUPS.join(', ')}.`);
    }
    const perMinute = Number(perMinuteText);
    const base = defaults[group as RateGroup];
    const burst =
      burstText === undefined
        ? Math.max(1, Math.round((perMinute * base.burst) / base.perMinute))
        : Number(burstText);
    if (perMinute < 1 || burst < 1)
      throw new Error(`Rate limit "${item}" must be at least 1 per minute with a burst of at least 1.`);
    overrides[group as RateGroup] = { perMinute, burst };
  }
  return overrides;
}

export function effectiveLimits(
  defaults: Record<RateGroup, RateLimit>,
  overrides: RateLimitOverrides | null,
): Record<RateGroup, RateLimit> {
  return { ...defaults, ...(overrides ?? {}) };
}

/** The first group whose limit in `overrides` is above its ceiling, with that ceiling; null when none is. */
export function aboveCeiling(
  overrides: RateLimitOverrides,
  ceilings: Record<RateGroup, RateLimit>,
): { group: RateGroup; ceiling: RateLimit } | null {
  for (const [group, limit] of Object.entries(overrides) as [RateGroup, RateLimit][]) {
    const ceiling = ceilings[group];
    if (limit.perMinute > ceiling.perMinute || limit.burst > ceiling.burst) return { group, ceiling };
  }
  return null;
}

/** `overrides` with each group held to its ceiling, and the groups that had to be lowered. */
export function withinCeilings(
  overrides: RateLimitOverrides,
  ceilings: Record<RateGroup, RateLimit>,
): { limits: RateLimitOverrides; lowered: RateGroup[] } {
  const limits: RateLimitOverrides = {};
  const lowered: RateGroup[] = [];
  for (const [group, limit] of Object.entries(overrides) as [RateGroup, RateLimit][]) {
    const ceiling = ceilings[group];
    const held = {
      perMinute: Math.min(limit.perMinute, ceiling.perMinute),
      burst: Math.min(limit.burst, ceiling.burst),
    };
    if (held.perMinute !== limit.perMinute || held.burst !== limit.burst) lowered.push(group);
    limits[group] = held;
  }
  return { limits, lowered };
}

/**
 * The limit of the organisation-wide bucket a key's request is also charged to: the organisation's ceiling,
 * or the key's own limit where the operator set it higher (the operator's own `svc keys limits` is not bound
 * by ceilings, so such a key may draw more from the shared bucket; every other key stops at the ceiling).
 */
export function organisationLimit(ceiling: RateLimit, keyLimit: RateLimit): RateLimit {
  return {
    perMinute: Math.max(ceiling.perMinute, keyLimit.perMinute),
    burst: Math.max(ceiling.burst, keyLimit.burst),
  };
}
