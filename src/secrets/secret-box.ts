import { createCipheriv, createDecipheriv, hash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * AES-256-GCM under the appliance's master key. Each ciphertext names the key that sealed it
 * (`v1.<keyId>.<iv>.<tag>.<ciphertext>`, base64url parts), so a rotated master key can still open older
 * rows until they are re-encrypted. GCM's tag means a flipped bit is detected rather than decrypted into
 * garbage.
 */
export interface MasterKey {
  id: string;
  key: Buffer;
}

/** The keys a box holds: the one that seals, and older ones that still open what they sealed. */
export interface KeyRing {
  active: MasterKey;
  older: MasterKey[];
}

/**
 * Where a box's keys come from, when that can change under a running process (the key file, which
 * `svc master-key rotate` rewrites). `changed()` answers a fresh ring when the source changed since it was
 * last read, and null otherwise; it is called before every seal and when a ciphertext names a key the box
 * does not hold, so a process started before a rotation seals with the new key and opens rows re-sealed
 * with it, without a restart.
 */
export interface KeySource {
  changed(): KeyRing | null;
}

export class SecretBox {
  private active: MasterKey;
  private byId = new Map<string, Buffer>();

  constructor(
    active: MasterKey,
    older: MasterKey[] = [],
    private readonly source?: KeySource,
  ) {
    this.active = active;
    this.use({ active, older });
  }

  get activeKeyId(): string {
    this.reloadQuietly();
    return this.active.id;
  }

  /** Every key id this box can open. */
  get keyIds(): string[] {
    return [...this.byId.keys()];
  }

  seal(plaintext: string, context = ''): string {
    this.reloadQuietly();
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.active.key, iv);
    cipher.setAAD(Buffer.from(context));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [
      'v1',
      this.active.id,
      iv.toString('base64url'),
      cipher.getAuthTag().toString('base64url'),
      body.toString('base64url'),
    ].join('.');
  }

  open(sealed: string, context = ''): string {
    const [version, keyId, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !keyId || !iv || !tag || body === undefined)
      throw new SecretError('malformed ciphertext');
    const key = this.byId.get(keyId) ?? this.reloadFor(keyId);
    try {
      // Without authTagLength, Node accepts a tag cut to as little as 4 bytes, which makes forgery cheap.
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), {
        authTagLength: 16,
      });
      decipher.setAAD(Buffer.from(context));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString(
        'utf8',
      );
    } catch {
      throw new SecretError('ciphertext failed its integrity check (tampered, or wrong master key)');
    }
  }

  /**
   * A 32-byte key for one purpose (`label`), derived from a master key by HKDF-SHA256: from the active key,
   * or from `keyId` (null when the box does not hold it). What it signs names the master key's id, so that
   * after a rotation a signature made under the older key still checks until that key is retired.
   */
  derivedKey(label: string, keyId?: string): { keyId: string; key: Buffer } | null {
    this.reloadQuietly();
    const id = keyId ?? this.active.id;
    const master = this.byId.get(id);
    if (!master) return null;
    return { keyId: id, key: Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), label, 32)) };
  }

  /** True when `sealed` was made with an older master key and should be re-sealed. */
  isStale(sealed: string): boolean {
    return keyIdOf(sealed) !== this.active.id;
  }

  private use(ring: KeyRing): void {
    this.active = ring.active;
    this.byId = new Map([...ring.older, ring.active].map((k) => [k.id, k.key]));
  }

  /** Before sealing: a key file that cannot be read right now leaves the keys in hand, which still work. */
  private reloadQuietly(): void {
    try {
      const ring = this.source?.changed();
      if (ring) this.use(ring);
    } catch {
      // Kept as they were; `open` reports a reload failure when it needs a key it does not have.
    }
  }

  private reloadFor(keyId: string): Buffer {
    let ring: KeyRing | null | undefined;
    try {
      ring = this.source?.changed();
    } catch (error) {
      throw new SecretError(
        `ciphertext was sealed with master key ${keyId}, which this process does not hold, and the key file could not be read again: ${(error as Error).message}`,
      );
    }
    if (ring) this.use(ring);
    const key = this.byId.get(keyId);
    if (!key) throw new SecretError(`ciphertext was sealed with unknown master key ${keyId}`);
    return key;
  }
}

/** The key id a sealed value names, or null when it is not one. */
export function keyIdOf(sealed: string): string | null {
  const [version, keyId] = sealed.split('.');
  return version === 'v1' && keyId ? keyId : null;
}

export class SecretError extends Error {
  override name = 'SecretError';
}

export function sha256Hex(value: string): string {
  return hash('sha256', value);
}

/** Constant-time comparison of two hex digests of equal length. */
export function sameDigest(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
