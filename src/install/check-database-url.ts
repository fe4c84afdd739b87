import { accessSync, constants, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { CliError, databaseUnavailable } from '../errors/cli-error.js';
import { maskUrl } from '../db/database-url.js';
import { engineOf, probePostgres, sqlitePath } from '../db/database.js';

/**
 * Checks a `--database-url` before `svc install` writes anything: it parses, and the database answers (a
 * Postgres server that accepts the login and has the schema; a SQLite file that can be created where it
 * points). A URL saved unchecked into config.json used to make every later run fail, and the corrected
 * re-run was refused as a change of database. Throws one line with the password masked: exit 78 for a URL
 * that cannot work, 69 for a database that does not answer.
 */
export async function checkDatabaseUrl(url: string): Promise<void> {
  const shown = maskUrl(url);
  const sentence = (reason: string) =>
    `--database-url ${shown} cannot be used: ${reason}. Nothing was written; run svc install again with a working URL.`;
  const refuse = (reason: string) => new CliError('invalid_configuration', sentence(reason), 78);
  let engine: ReturnType<typeof engineOf>;
  try {
    engine = engineOf(url);
  } catch {
    throw refuse('it must start with postgres://, postgresql:// or sqlite://');
  }
  if (engine === 'sqlite') {
    checkSqliteFile(sqlitePath(url), refuse);
    return;
  }
  if (!URL.canParse(url)) throw refuse('it is not a valid URL');
  let schema: string | null;
  try {
    schema = await probePostgres(url);
  } catch (error) {
    throw databaseUnavailable(sentence(describeError(error)));
  }
  // Postgres has no current schema when none on the search path exists: the migrations would fail after
  // config.json was written.
  if (schema === null) {
    const wanted = new URL(url).searchParams.get('schema');
    throw refuse(wanted ? `schema "${wanted}" does not exist (create schema ${wanted})` : 'no schema to use');
  }
}

/** Without creating anything: the file, or the nearest directory that exists on its way, is writable. */
function checkSqliteFile(file: string, refuse: (reason: string) => CliError): void {
  if (file === '') throw refuse('it names no file (sqlite:///absolute/path.db)');
  let path = resolve(file);
  for (;;) {
    let isDirectory: boolean;
    try {
      isDirectory = statSync(path).isDirectory();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' && dirname(path) !== path) {
        path = dirname(path);
        continue;
      }
      throw refuse(`${path}: ${code ?? (error as Error).message}`);
    }
    if (path === resolve(file)) {
      if (isDirectory) throw refuse(`${path} is a directory`);
    } else if (!isDirectory) {
      throw refuse(`${path} is not a directory`);
    }
    try {
      accessSync(path, constants.W_OK);
    } catch {
      throw refuse(`${path} is not writable by this user`);
    }
    return;
  }
}

function describeError(error: unknown): string {
  const { message, code } = error as { message?: string; code?: string };
  const text = (message ?? String(error)).split('\n')[0]!.trim();
  const reason = text || code || 'the database did not answer';
  return code && !reason.includes(code) ? `${reason} (${code})` : reason;
}
