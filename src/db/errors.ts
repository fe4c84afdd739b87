/** Translations of driver errors, so no other folder needs to know a dialect's error codes. */
interface DriverError {
  code?: string;
  errno?: number;
  message?: string;
}

export function isBusyError(error: unknown): boolean {
  const code = (error as DriverError)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED';
}

export function isUniqueViolation(error: unknown): boolean {
  const { code, message } = (error as DriverError) ?? {};
  return code === '23505' || (code === 'SQLITE_CONSTRAINT' && /UNIQUE|PRIMARY KEY/.test(message ?? ''));
}

/** The database cannot be reached (down, restarting, refusing connections): a 503, not a 500. */
export function isUnavailableError(error: unknown): boolean {
  const { code, message } = (error as DriverError) ?? {};
  if (
    code &&
    [
      'ECONNREFUSED',
      'ECONNRESET',
      'ETIMEDOUT',
      'EPIPE',
      '57P01',
      '57P02',
      '57P03',
      '08006',
      '08001',
    ].includes(code)
  )
    return true;
  if (isBusyError(error)) return true;
  return /Knex: Timeout acquiring a connection|Connection terminated|database did not answer/.test(
    message ?? '',
  );
}
