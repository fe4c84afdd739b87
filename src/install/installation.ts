import { existsSync } from 'node:fs';
import type { Config } from '../config/defaults.js';
import { engineOf, sqlitePath } from '../db/database.js';

/**
 * Why this home holds no installation, or null when it does. Every command but `svc install`, `svc help` and
 * `svc doctor` asks first, so that a mistyped `--home` or a fresh machine gets one line that says what to run
 * instead of an empty SQLite file made in passing (opening SQLite creates the file) and a raw SQL error.
 * On SQLite the database file is the installation; a Postgres database is checked when it is opened (no
 * svc tables: `svc install`), since its URL may come from the environment alone.
 */
export function installationProblem(config: Readonly<Config>): string | null {
  if (engineOf(config.databaseUrl) !== 'sqlite') return null;
  const file = sqlitePath(config.databaseUrl);
  if (existsSync(file)) return null;
  return `No svc installation in ${config.home} (no database at ${file}). Run \`svc install\` first, or point --home or SVC_HOME at the data directory.`;
}

/** The line for a database that answers but holds none of svc's tables. */
export function emptyDatabaseProblem(where: string): string {
  return `The database (${where}) has no svc tables. Run \`svc install\` first.`;
}
