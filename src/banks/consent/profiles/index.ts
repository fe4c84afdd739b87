import type { SecurityProfile } from '../../institutions.js';
import type { CountryProfile } from '../profile.js';
import { brasil } from './brasil.js';
import { chile } from './chile.js';

/** Every country profile, by the security profile an institution names (banks/institutions.ts). */
const PROFILES: Readonly<Record<SecurityProfile, CountryProfile>> = { 'fapi2-cl': chile, 'fapi1-br': brasil };

export function profileOf(security: SecurityProfile): CountryProfile {
  return PROFILES[security];
}
