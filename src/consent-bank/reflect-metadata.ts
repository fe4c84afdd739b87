/*
 * @peculiar/x509 registers its ASN.1 providers with tsyringe, which refuses to load without the
 * `Reflect.getMetadata` family (the `reflect-metadata` package, not among our dependencies; package.json is
 * not ours to change in this room). Only what tsyringe calls is here: metadata kept in a WeakMap per target
 * and property. Imported for its effect, before @peculiar/x509 (test-ca.ts); it never replaces a real one.
 */

type Key = string | symbol | undefined;
const store = new WeakMap<object, Map<Key, Map<unknown, unknown>>>();

function table(target: object, property: Key, create: boolean): Map<unknown, unknown> | undefined {
  let byProperty = store.get(target);
  if (!byProperty && create) store.set(target, (byProperty = new Map()));
  let entries = byProperty?.get(property);
  if (!entries && create && byProperty) byProperty.set(property, (entries = new Map()));
  return entries;
}

function getOwn(key: unknown, target: object, property?: Key): unknown {
  return table(target, property, false)?.get(key);
}

function get(key: unknown, target: object, property?: Key): unknown {
  for (let at: object | null = target; at !== null; at = Object.getPrototypeOf(at) as object | null) {
    const value = table(at, property, false);
    if (value?.has(key)) return value.get(key);
  }
  return undefined;
}

const reflect = Reflect as unknown as Record<string, unknown>;
if (typeof reflect.getMetadata !== 'function') {
  Object.assign(reflect, {
    defineMetadata: (key: unknown, value: unknown, target: object, property?: Key) =>
      void table(target, property, true)!.set(key, value),
    getOwnMetadata: getOwn,
    getMetadata: get,
    hasOwnMetadata: (key: unknown, target: object, property?: Key) =>
      table(target, property, false)?.has(key) ?? false,
    hasMetadata: (key: unknown, target: object, property?: Key) => get(key, target, property) !== undefined,
    metadata: (key: unknown, value: unknown) => (target: object, property?: Key) =>
      void table(target, property, true)!.set(key, value),
  });
}

export {};
