/** Every component takes a clock so tests (and operators' drills) can move time instead of waiting. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock a test moves by hand. */
export class ManualClock implements Clock {
  constructor(private current: number = Date.UTC(2026, 0, 15, 12, 0, 0)) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}

/** A clock shifted by a fixed offset, for processes started with a moved clock (SVC_CLOCK_OFFSET_MS). */
export function offsetClock(offsetMs: number, base: Clock = systemClock): Clock {
  return offsetMs === 0 ? base : { now: () => base.now() + offsetMs };
}

export function toIso(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined ? null : new Date(ms).toISOString();
}
