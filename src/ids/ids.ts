import { randomBytes } from 'node:crypto';

export type IdPrefix =
  | 'org'
  | 'key'
  | 'link'
  | 'acc'
  | 'mov'
  | 'ri'
  | 'evt'
  | 'we'
  | 'wd'
  | 'wa'
  | 'job'
  | 'aud'
  | 'req'
  | 'cu'
  | 'cut'
  | 'grev';

/** `prefix_` + 16 lowercase hex characters from the CSPRNG, as the spec fixes for every resource id. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(8).toString('hex')}`;
}

export function isId(prefix: IdPrefix, value: string): boolean {
  return new RegExp(`^${prefix}_[0-9a-f]{16}$`).test(value);
}
