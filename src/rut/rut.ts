/**
 * Chilean RUT: a body of up to 8 digits and a modulo-11 check digit (0-9 or K), written with or without
 * dots and with or without the hyphen: `12.345.678-5`, `12345678-5`, `123456785`.
 */
export function rutCheckDigit(body: string): string {
  let sum = 0;
  let factor = 2;
  for (let i = body.length - 1; i >= 0; i--) {
    sum += Number(body[i]) * factor;
    factor = factor === 7 ? 2 : factor + 1;
  }
  const rest = 11 - (sum % 11);
  return rest === 11 ? '0' : rest === 10 ? 'K' : String(rest);
}

/** `12345678-5`, or null when the text is not a RUT or its check digit is wrong. */
export function normaliseRut(text: string): string | null {
  const compact = text.trim().replace(/\./g, '').replace(/-/g, '').toUpperCase();
  const match = /^(\d{1,8})([\dK])$/.exec(compact);
  if (!match) return null;
  const [, rawBody, digit] = match as unknown as [string, string, string];
  const body = rawBody.replace(/^0+(?=\d)/, '');
  return rutCheckDigit(body) === digit ? `${body}-${digit}` : null;
}

/** `12.345.678-5`, for people to read. */
export function formatRut(normalised: string): string {
  const [body, digit] = normalised.split('-') as [string, string];
  return `${body.replace(/\B(?=(\d{3})+(?!\d))/g, '.')}-${digit}`;
}
