/*
 * Sign-in attempts per client address, in this process's memory: past MAX_FAILURES failed attempts within
 * WINDOW_MS, an address gets 429 until the window ends. The per-account lock-out (users.ts) stops guessing
 * one account's password; this stops one address from trying many accounts. At most MAX_ADDRESSES are
 * remembered (the oldest forgotten first), so a spray from many addresses cannot grow the map without bound.
 */

const MAX_FAILURES = 20;
const WINDOW_MS = 15 * 60_000;
const MAX_ADDRESSES = 10_000;

export class LoginThrottle {
  private readonly failures = new Map<string, { count: number; since: number }>();

  allows(address: string, now: number): boolean {
    const entry = this.failures.get(address);
    if (!entry || now - entry.since >= WINDOW_MS) return true;
    return entry.count < MAX_FAILURES;
  }

  failed(address: string, now: number): void {
    const entry = this.failures.get(address);
    this.failures.delete(address);
    const fresh = !entry || now - entry.since >= WINDOW_MS;
    this.failures.set(
      address,
      fresh ? { count: 1, since: now } : { count: entry.count + 1, since: entry.since },
    );
    if (this.failures.size > MAX_ADDRESSES) this.failures.delete(this.failures.keys().next().value!);
  }

  succeeded(address: string): void {
    this.failures.delete(address);
  }
}
