// oidc-provider ships no type declarations; the consent bank types what it uses at the call sites.
declare module 'oidc-provider';
declare module 'oidc-provider/lib/helpers/defaults.js';
