/**
 * Brazil's tax ids, as Open Finance Brasil carries them (digits only): the CPF of a person (11 digits) and the
 * CNPJ of a company (14 digits), each ending in two modulo-11 check digits. `123.456.789-09` and
 * `12.345.678/0001-95` are how people write them; the APIs want `12345678909` and `12345678000195`.
 */

/** One modulo-11 check digit over `digits` with the weights given (Receita Federal's rule: 10 and 11 give 0). */
function checkDigit(digits: string, weights: readonly number[]): string {
  const sum = [...digits].reduce((total, digit, i) => total + Number(digit) * weights[i]!, 0);
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

/** The two check digits of a CNPJ's first twelve digits. */
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

/** `12345678000195`, or null when the text is not a CNPJ (dots, slash and hyphen allowed). */
export function normaliseCnpj(text: string): string | null {
  const digits = text.trim().replace(/[./\-\s]/g, '');
  if (!/^\d{14}$/.test(digits) || /^(\d)\1{13}$/.test(digits)) return null;
  return cnpjCheckDigits(digits.slice(0, 12)) === digits.slice(12) ? digits : null;
}

/** `123.456.789-09`, for people to read. */
export function formatCpf(cpf: string): string {
  return `${cpf.slice(0, 3)}.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-${cpf.slice(9)}`;
}
