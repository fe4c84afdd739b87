import type { Logger } from '../logging/logger.js';

/*
 * oidc-provider is imported lazily, only when the consent bank starts: it is large, and on Node 20 it prints
 * one "Unsupported runtime" warning at import (it asks for Node 22; its tests and our own run it on 20).
 * That one known line goes to our logger at debug level instead of stderr; console.warn is replaced only
 * while the import evaluates, and every other warning passes through untouched.
 */

const KNOWN_WARNING = 'oidc-provider WARNING: Unsupported runtime';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type OidcModule = any;
let loading: Promise<OidcModule> | null = null;

export function loadOidcProvider(logger: Logger): Promise<OidcModule> {
  loading ??= (async () => {
    const original = console.warn;
    console.warn = (...args: unknown[]) => {
      if (typeof args[0] === 'string' && args[0].includes(KNOWN_WARNING)) {
        logger.debug(
          { module: 'oidc-provider' },
          'oidc-provider prefers Node 22; running on this Node anyway',
        );
        return;
      }
      original.apply(console, args);
    };
    try {
      // The library's defaults too, for a setting the bank changes only under a fault (refresh-token
      // rotation): the rule stays the library's own otherwise. The package has no export map, so the path is
      // its published file.
      const [library, { defaults }] = await Promise.all([
        import('oidc-provider'),
        import('oidc-provider/lib/helpers/defaults.js'),
      ]);
      return { ...library, defaults };
    } finally {
      console.warn = original;
    }
  })();
  return loading;
}
