import { createCipheriv, createDecipheriv, createHash, randomBytes, timingSafeEqual } from 'node:crypto';

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

export class SecretBox {
  private readonly byId: Map<string, Buffer>;

  constructor(
    private readonly active: MasterKey,
    older: MasterKey[] = [],
  ) {
    this.byId = new Map([...older, active].map((k) => [k.id, k.key]));
  }

  get activeKeyId(): string {
    return this.active.id;
  }

  seal(plaintext: string, context = ''): string {
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
    const key = this.byId.get(keyId);
    if (!key) throw new SecretError(`ciphertext was sealed with unknown master key ${keyId}`);
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

  /** True when `sealed` was made with an older master key and should be re-sealed. */
  isStale(sealed: string): boolean {
    return sealed.split('.')[1] !== this.active.id;
  }
}

export class SecretError extends Error {
  override name = 'SecretError';
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Constant-time comparison of two hex digests of equal length. */
export function sameDigest(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
