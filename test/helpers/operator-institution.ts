import type { OperatorInstitutionSettings } from '../../src/banks/institutions.js';

/**
 * A consent bank the operator added in config.json (`banks.institutions`, docs/open-finance.md "Adding an
 * institution"): Chilean, on Chile's FAPI 2.0 profile, for individuals' movements.
 */
export const ANDINO = {
  id: 'bancoandino',
  name: 'Banco Andino',
  country: 'CL',
  connection: 'consent',
  profile: {
    security: 'fapi2-cl',
    data: ['ob-br-accounts-2'],
    covers: ['accounts', 'balances', 'movements'],
    maxDurationMonths: 12,
  },
  products: ['movements'],
  holderTypes: ['individual'],
} satisfies OperatorInstitutionSettings;
