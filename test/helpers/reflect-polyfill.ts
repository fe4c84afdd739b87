/*
 * @peculiar/x509 2 resolves its parts through tsyringe, which refuses to load without the Reflect metadata
 * API (`reflect-metadata`, not installed). The handful of calls it makes are met by this map; imported
 * before @peculiar/x509 by the test CA (oidc-stub.ts). The simulated bank may bring its own polyfill: one
 * is enough, and this one steps aside when the API is already there.
 */
type Target = object;
const store = new WeakMap<Target, Map<unknown, unknown>>();
const reflect = Reflect as unknown as Record<string, unknown>;
if (typeof reflect.getMetadata !== 'function') {
  const own = (target: Target) => {
    let map = store.get(target);
    if (!map) store.set(target, (map = new Map()));
    return map;
  };
  reflect.defineMetadata = (key: unknown, value: unknown, target: Target) => void own(target).set(key, value);
  reflect.getOwnMetadata = (key: unknown, target: Target) => store.get(target)?.get(key);
  reflect.getMetadata = (key: unknown, target: Target): unknown => {
    for (let t: Target | null = target; t; t = Object.getPrototypeOf(t) as Target | null) {
      const value = store.get(t)?.get(key);
      if (value !== undefined) return value;
    }
    return undefined;
  };
  reflect.hasMetadata = (key: unknown, target: Target) =>
    reflect.getMetadata !== undefined &&
    (reflect.getMetadata as (k: unknown, t: Target) => unknown)(key, target) !== undefined;
  reflect.metadata = (key: unknown, value: unknown) => (target: Target) => void own(target).set(key, value);
}
