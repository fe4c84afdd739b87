/*
 * The bank's consent ids and how a token's scope names one (consents 3.3.1: the scope `consent:<consentId>`,
 * the id a URN): read by the authorization step (brasil-profile.ts) and the APIs (brasil-apis.ts) alike.
 */

/** The consent ids' URN namespace (`urn:bancoabierto-br:<uuid>`). */
export const CONSENT_NAMESPACE = 'bancoabierto-br';
export const CONSENT_SCOPE = /^consent:(urn:[a-zA-Z0-9][a-zA-Z0-9-]{0,31}:[a-zA-Z0-9()+,\-.:=@;$_!*'%/?#]+)$/;

/** The consent id a scope string names (`consent:urn:…`), or null. */
export function consentIdOfScope(scope: unknown): string | null {
  if (typeof scope !== 'string') return null;
  for (const item of scope.split(' ')) {
    const match = CONSENT_SCOPE.exec(item);
    if (match) return match[1]!;
  }
  return null;
}
