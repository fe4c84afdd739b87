import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

export type KeyType = 'secret' | 'publishable';
export type Mode = 'live' | 'test';

const TYPE_CODE: Record<KeyType, string> = { secret: 'sk', publishable: 'pk' };
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BODY_LENGTH = 32;
const CHECKSUM_LENGTH = 6;

/**
 * `{brand}_{sk|pk}_{mode}_{32 base62}{6 base62 CRC32}`. The checksum (as GitHub's tokens carry) lets us
 * refuse a mistyped or truncated key before any database read, and lets secret scanners recognise ours.
 */
export function generateApiKey(brand: string, type: KeyType, mode: Mode): string {
  const prefix = `${brand}_${TYPE_CODE[type]}_${mode}_`;
  const body = randomBase62(BODY_LENGTH);
  return prefix + body + checksum(prefix + body);
}

export interface ParsedKey {
  brand: string;
  type: KeyType;
  mode: Mode;
  prefix: string;
}

const KEY_PATTERN = new RegExp(
  `^([a-z][a-z0-9]{1,15})_(sk|pk)_(live|test)_([0-9A-Za-z]{${BODY_LENGTH}})([0-9A-Za-z]{${CHECKSUM_LENGTH}})$`,
);

/** The parts of a well-formed key of this brand whose checksum holds; null for anything else. */
export function parseApiKey(token: string, brand: string): ParsedKey | null {
  const match = KEY_PATTERN.exec(token);
  if (!match) return null;
  const [, keyBrand, typeCode, mode, body, sum] = match as unknown as [
    string,
    string,
    'sk' | 'pk',
    Mode,
    string,
    string,
  ];
  if (keyBrand !== brand) return null;
  const prefix = `${keyBrand}_${typeCode}_${mode}_`;
  if (checksum(prefix + body) !== sum) return null;
  return { brand: keyBrand, type: typeCode === 'sk' ? 'secret' : 'publishable', mode, prefix };
}

export function looksLikeApiKey(token: string): boolean {
  return /^[a-z][a-z0-9]{1,15}_(sk|pk)_/.test(token);
}

function checksum(text: string): string {
  let value = crc32(text);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = BASE62[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

export function randomBase62(length: number): string {
  // Rejection sampling keeps every character equally likely (256 is not a multiple of 62).
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}
