/**
 * Errors a command stops with that are about the installation rather than the request: each has a stable
 * `code` for `--json` and an exit code (sysexits: 69 a service is unavailable, 75 try again later, as when a
 * running server holds a migration back, 78 configuration), mapped
 * once in BaseCommand's `catch`.
 */
export class CliError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly exit: number,
    /** Printed beside `code` and `message` with `--json` (e.g. what a deferred migration run applied). */
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** The home has no installation (no database), or the database has none of svc's tables. */
export function notInstalled(message: string): CliError {
  return new CliError('not_installed', message, 78);
}

/** The database cannot be reached or opened. */
export function databaseUnavailable(message: string): CliError {
  return new CliError('database_unavailable', message, 69);
}
