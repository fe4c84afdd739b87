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
  // pg's "Client has encountered a connection error and is not queryable" comes from a ROLLBACK that knex
  // sends on a connection that has just dropped.
  return /Knex: Timeout acquiring a connection|Connection terminated|is not queryable|database did not answer/.test(
    message ?? '',
  );
}

/** A statement named a table that does not exist: the schema was never created (`svc install`). */
export function isMissingTableError(error: unknown): boolean {
  const { code, message } = (error as DriverError) ?? {};
  return code === '42P01' || (code === 'SQLITE_ERROR' && /no such table/.test(message ?? ''));
}

/**
 * The longest a worker waits between tries while the database is away: backing off spares a database that
 * is struggling, and the cap bounds how long after its return the work resumes (test/e2e/db-outage.test.ts
 * holds the appliance to 10 s; with a 30 s cap a 33 s outage left deliveries waiting 28 s more).
 */
export const DATABASE_RETRY_CAP_MS = 3_000;
