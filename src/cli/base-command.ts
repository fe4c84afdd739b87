import { userInfo } from 'node:os';
import { Command, Flags } from '@oclif/core';
import { systemClock, offsetClock, type Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import { ConfigError, loadConfig, type LoadConfigOptions } from '../config/load-config.js';
import { maskUrl } from '../db/database-url.js';
import { ApiError } from '../errors/api-error.js';
import { openDatabase, type Database } from '../db/database.js';
import { isBusyError, isMissingTableError, isUnavailableError } from '../db/errors.js';
import { emptyDatabaseProblem, installationProblem } from '../install/installation.js';
import { otherHomeHint, servesOnThisMachine } from '../processes/other-homes.js';
import { CliError, databaseUnavailable, notInstalled } from '../errors/cli-error.js';
import { printable } from './views/format.js';

/**
 * Every command: `--home`, `--json` (oclif prints what `run()` returns), configuration loaded once, and
 * errors mapped to a message and exit code once.
 */
export abstract class BaseCommand extends Command {
  static override enableJsonFlag = true;
  static override baseFlags = {
    home: Flags.string({ description: 'data directory (default: $SVC_HOME or ~/.svc)', helpGroup: 'GLOBAL' }),
  };

  private cachedConfig: Readonly<Config> | null = null;

  /**
   * The settings, once. Unless `installed: false` (`svc doctor`), a home without an installation stops the
   * command here, before anything opens (and so creates) a SQLite file in it.
   */
  protected appConfig(
    home: string | undefined,
    overrides?: LoadConfigOptions['overrides'],
    { installed = true }: { installed?: boolean } = {},
  ): Readonly<Config> {
    this.cachedConfig ??= loadConfig({ home, env: process.env, overrides });
    this.databaseUrl = this.cachedConfig.databaseUrl;
    if (installed) {
      const problem = installationProblem(this.cachedConfig);
      if (problem) throw notInstalled(this.withOtherHome(problem));
    }
    return this.cachedConfig;
  }

  /**
   * `text`, and when no `svc serve` runs from this command's home but one runs from another on this machine,
   * a sentence naming that one and how to point at it: what a person needs when the CLI finds nothing.
   */
  protected withOtherHome(text: string): string {
    if (!this.cachedConfig) return text;
    const hint = otherHomeHint(this.cachedConfig.home, servesOnThisMachine());
    return hint ? `${text} ${hint}` : text;
  }

  /** For a person, the line that says a list is empty: it names the home, and a server of another one. */
  protected logNothingFound(text: string): void {
    const home = this.cachedConfig ? ` (data directory ${this.cachedConfig.home})` : '';
    this.log(this.withOtherHome(`${text.replace(/\.$/, '')}${home}.`));
  }

  /** The configured database URL, known once the config is loaded: its password is masked in every error. */
  private databaseUrl: string | null = null;

  protected clock(config: Readonly<Config>): Clock {
    return offsetClock(config.clockOffsetMs, systemClock);
  }

  protected actor(): string {
    return `cli:${userInfo().username}`;
  }

  /**
   * Opens the database and checks that it answers. A database that cannot be reached stops the command with
   * one line that names the engine and host (never the password) and the cause, for every command alike.
   * The caller closes it; most commands use `withDatabase` instead.
   */
  protected async openDatabase(config: Readonly<Config>): Promise<Database> {
    const db = openDatabase({ url: config.databaseUrl, quiet: true });
    try {
      // One round trip first, so that an unreachable database is told apart from a failing statement.
      await db.ping(10_000);
      return db;
    } catch (error) {
      await db.close().catch(() => undefined);
      throw unreachable(db, error);
    }
  }

  /**
   * Opens the database for the duration of `work` and closes it after, whatever happens. Besides what
   * `openDatabase` says, a database without svc's tables says to run `svc install`.
   */
  protected async withDatabase<T>(config: Readonly<Config>, work: (db: Database) => Promise<T>): Promise<T> {
    const db = await this.openDatabase(config);
    try {
      return await work(db);
    } catch (error) {
      throw this.explained(db, error);
    } finally {
      await db.close();
    }
  }

  /** A driver error a person can act on, as one of our errors; anything else as it was. */
  protected explained(db: Database, error: unknown): unknown {
    if (error instanceof CliError) return error;
    if (isMissingTableError(error))
      return notInstalled(this.withOtherHome(emptyDatabaseProblem(db.describe())));
    // The database went away mid-command (a lock wait that ran out is not that: it says so itself).
    if (isUnavailableError(error) && !isBusyError(error)) return unreachable(db, error);
    return error;
  }

  /**
   * Every line the CLI prints for a person: what it shows of a tenant's, a bank's or a receiver's text must
   * not drive the operator's terminal (views.format `printable`).
   */
  override log(message = '', ...args: unknown[]): void {
    super.log(typeof message === 'string' ? printable(message, true) : message, ...args);
  }

  override logToStderr(message = '', ...args: unknown[]): void {
    super.logToStderr(typeof message === 'string' ? printable(message, true) : message, ...args);
  }

  /** `text` without the database password, whichever way a driver or a URL in it spelled it. */
  protected masked(text: string): string {
    let result = maskUrl(text);
    const url = this.databaseUrl;
    if (url && !url.startsWith('sqlite:')) {
      try {
        const password = new URL(url).password;
        for (const spelling of new Set([password, decodeURIComponent(password)]))
          if (spelling.length > 0) result = result.split(spelling).join('****');
      } catch {
        // not a URL we can take apart: maskUrl did what it could
      }
    }
    return result;
  }

  /** Maps an error to a message and exit code once; with `--json`, the error is printed as JSON on stdout. */
  protected override async catch(error: Error & { exitCode?: number; oclif?: unknown }): Promise<unknown> {
    if (error.oclif && !(error instanceof ApiError)) {
      // A usage mistake (an unknown flag, a missing argument): oclif's own `--json` answer is the whole
      // parse context (hundreds of lines of its configuration); a script needs the code and the message.
      const usageExit = (error.oclif as { exit?: number }).exit;
      if (this.jsonEnabled() && usageExit !== undefined && usageExit !== 0) {
        this.logJson({ error: { code: 'usage', message: this.masked(error.message) } });
        this.exit(usageExit);
      }
      return super.catch(error);
    }
    const { code, exit } =
      error instanceof ConfigError
        ? { code: 'invalid_configuration', exit: 78 }
        : error instanceof CliError
          ? { code: error.code, exit: error.exit }
          : error instanceof ApiError
            ? { code: error.code, exit: error.status === 404 ? 4 : 1 }
            : { code: 'error', exit: 1 };
    // A thing not found by its id may be in another data directory: say which was searched.
    const text = this.masked(
      error instanceof ApiError && error.status === 404 && this.cachedConfig
        ? this.withOtherHome(`${error.message} Looked in data directory ${this.cachedConfig.home}.`)
        : error.message,
    );
    const message = error instanceof ApiError ? `${error.code}: ${text}` : text;
    if (this.jsonEnabled()) {
      const details = error instanceof CliError ? error.details : undefined;
      this.logJson({ error: { code, message: text, ...details } });
      this.exit(exit);
    }
    if (error instanceof CliError) {
      // One line, unwrapped, so that a log or a monitoring check keeps it whole.
      process.stderr.write(`Error: ${printable(message)}\n`);
      this.exit(exit);
    }
    this.error(printable(message, true), { exit });
  }
}

/** The line for a database that does not answer: engine and host (describe() carries no password), and why. */
function unreachable(db: Database, error: unknown): CliError {
  const cause = (error as Error)?.message || String(error);
  return databaseUnavailable(
    `Cannot reach the database (${db.describe()}): ${cause}. ${
      db.engine === 'sqlite'
        ? 'Check that the file is an svc database that this user can read and write'
        : 'Check that the server is running and that databaseUrl is right'
    }; \`svc doctor\` checks the installation.`,
  );
}

/** Parses `24h`, `30m`, `90s`, `7d` or plain seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+)\s*([smhd]?)$/.exec(text.trim());
  if (!match) throw new Error(`"${text}" is not a duration; use e.g. 90s, 30m, 24h or 7d.`);
  const unit = { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
  return Number(match[1]) * unit;
}
