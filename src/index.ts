/**
 * The package entry, for receivers of our webhooks: it imports nothing but `node:crypto`, so a receiver can
 * depend on the package without loading the appliance.
 */
export {
  verifySignature,
  parseSignatureHeader,
  computeSignature,
  DEFAULT_TOLERANCE_SECONDS,
  type VerifyOptions,
  type ParsedSignature,
} from './webhooks/signature.js';
