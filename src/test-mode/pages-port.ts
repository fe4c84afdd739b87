/**
 * The simulated banks' pages' port: two after the Chilean bank's mTLS port (8445 by default; 8444 is the
 * Brazilian bank's), or a free one when that is 0. Its own module, so `svc doctor` names it without loading
 * the banks.
 */
export function pagesPort(chileanPort: number): number {
  return chileanPort === 0 ? 0 : chileanPort + 2;
}
