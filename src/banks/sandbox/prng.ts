import { createHash } from 'node:crypto';

/**
 * Seeded randomness for the sandbox. Every draw starts from a seed that names what is drawn (account,
 * day, month, ...), so a day's rows never depend on which other days a call happened to generate: two
 * windows that both cover a day draw exactly the same numbers for it.
 *
 * Names are hashed with SHA-256 once (an account's seed text, a month's salary); the per-day seeds are
 * mixed from that hash and the day number with murmur3's finaliser, because a SHA-256 per generated day
 * was half the cost of computing a balance over six years of history.
 */
export interface Rng {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [min, max], both inclusive. */
  int(min: number, max: number): number;
  /** True with probability `p`. */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
}

/** The first 32 bits of SHA-256 of the parts joined with `|`. */
export function hash32(...parts: ReadonlyArray<string | number>): number {
  return createHash('sha256').update(parts.join('|')).digest().readUInt32BE(0);
}

/** Lowercase hex of SHA-256 of the parts joined with `|`, cut to `length` characters. */
export function hashHex(length: number, ...parts: ReadonlyArray<string | number>): string {
  return createHash('sha256').update(parts.join('|')).digest('hex').slice(0, length);
}

/** murmur3's 32-bit finaliser: a bijective mix with full avalanche. */
function fmix32(value: number): number {
  let h = value >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A 32-bit seed from a hashed seed and small integers (a day, a block number, a label constant). */
export function mixSeed(seed: number, ...values: number[]): number {
  let h = seed >>> 0;
  for (const value of values) h = fmix32(h ^ (Math.imul(value | 0, 0x9e3779b1) + 0x7f4a7c15));
  return h;
}

/** mulberry32 (Tommy Ettinger): a 32-bit state, good enough for fake data and fully reproducible. */
export function mulberry32(seed: number): Rng {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: <T>(items: readonly T[]): T => {
      const item = items[Math.floor(next() * items.length)];
      if (item === undefined) throw new Error('pick from an empty list');
      return item;
    },
  };
}

/** A generator seeded by SHA-256 of the parts: the same parts always give the same sequence. */
export function rngFor(...parts: ReadonlyArray<string | number>): Rng {
  return mulberry32(hash32(...parts));
}
