/**
 * Brazil's tax ids, as Open Finance Brasil carries them (no mask): the CPF of a person (11 digits) and the
 * CNPJ of a company (14 characters), each ending in two modulo-11 check digits. `123.456.789-09` and
 * `12.345.678/0001-95` are how people write them; the APIs want `12345678909` and `12345678000195`.
 *
 * From July 2026 the Receita Federal also issues alphanumeric CNPJs: 12 letters (A to Z) or digits, then
 * the two check digits, still digits, computed with the same weights over each character's value
 * `ASCII − 48` (`0`–`9` stay 0–9, `A` is 17, `Z` is 42), e.g. `12.ABC.345/01DE-35`. Open Finance Brasil's
 * consents 3.3.1 file takes them (`BusinessEntityDocument.identification`: `^[0-9A-Z]{12}[0-9]{2}$`);
 * accounts 2.4.2 and credit cards 2.3.1 still want 14 digits (`companyCnpj`, `partieCnpjCpf`), and their
 * schemas refuse one there.
 */

/** One modulo-11 check digit over `chars` with the weights given (Receita Federal: 10 and 11 give 0). */
function checkDigit(chars: string, weights: readonly number[]): string {
  const sum = [...chars].reduce((total, char, i) => total + (char.charCodeAt(0) - 48) * weights[i]!, 0);
  const rest = sum % 11;
  return String(rest < 2 ? 0 : 11 - rest);
}

const CPF_WEIGHTS = [11, 10, 9, 8, 7, 6, 5, 4, 3, 2];
const CNPJ_WEIGHTS = [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];

/** The two check digits of a CPF's first nine digits. */
export function cpfCheckDigits(nine: string): string {
  const first = checkDigit(nine, CPF_WEIGHTS.slice(1));
  return first + checkDigit(nine + first, CPF_WEIGHTS);
}

/** The two check digits of a CNPJ's first twelve characters (digits, or upper-case letters since 2026). */
export function cnpjCheckDigits(twelve: string): string {
  const first = checkDigit(twelve, CNPJ_WEIGHTS.slice(1));
  return first + checkDigit(twelve + first, CNPJ_WEIGHTS);
}

/**
 * `12345678909`, or null when the text is not a CPF: dots, the hyphen and spaces are allowed; eleven equal
 * digits (`111.111.111-11`) pass the arithmetic but are not issued, so they are refused too.
 */
export function normaliseCpf(text: string): string | null {
  const digits = text.trim().replace(/[.\-\s]/g, '');
  if (!/^\d{11}$/.test(digits) || /^(\d)\1{10}$/.test(digits)) return null;
  return cpfCheckDigits(digits.slice(0, 9)) === digits.slice(9) ? digits : null;
}

/**
 * `12345678000195` (or `12ABC34501DE35`), or null when the text is not a CNPJ: dots, slash, hyphen and
 * spaces are allowed, letters in either case (kept upper-case, as the consents file wants); fourteen equal
 * digits pass the arithmetic but are not issued.
 */
export function normaliseCnpj(text: string): string | null {
  const compact = text.trim().replace(/[./\-\s]/g, '');
  // Checked before upper-casing: `ı` and `ſ` upper-case to `I` and `S`.
  if (!/^[0-9A-Za-z]{12}\d{2}$/.test(compact) || /^(\d)\1{13}$/.test(compact)) return null;
  const chars = compact.toUpperCase();
  return cnpjCheckDigits(chars.slice(0, 12)) === chars.slice(12) ? chars : null;
}

/** `123.456.789-09`, for people to read. */
export function formatCpf(cpf: string): string {
  return `${cpf.slice(0, 3)}.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-${cpf.slice(9)}`;
}
