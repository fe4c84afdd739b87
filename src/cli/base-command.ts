import { userInfo } from 'node:os';
import { Command, Flags } from '@oclif/core';
import { systemClock, offsetClock, type Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import { ConfigError, loadConfig, type LoadConfigOptions } from '../config/load-config.js';
import { ApiError } from '../errors/api-error.js';
import { openDatabase, type Database } from '../db/database.js';
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

  protected appConfig(
    home: string | undefined,
    overrides?: LoadConfigOptions['overrides'],
  ): Readonly<Config> {
    this.cachedConfig ??= loadConfig({ home, env: process.env, overrides });
    return this.cachedConfig;
  }

  protected clock(config: Readonly<Config>): Clock {
    return offsetClock(config.clockOffsetMs, systemClock);
  }

  protected actor(): string {
    return `cli:${userInfo().username}`;
  }

  /** Opens the database for the duration of `work` and closes it after, whatever happens. */
  protected async withDatabase<T>(config: Readonly<Config>, work: (db: Database) => Promise<T>): Promise<T> {
    const db = openDatabase({ url: config.databaseUrl });
    try {
      return await work(db);
    } finally {
      await db.close();
    }
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

  /** Maps an error to a message and exit code once; with `--json`, the error is printed as JSON on stdout. */
  protected override async catch(error: Error & { exitCode?: number; oclif?: unknown }): Promise<unknown> {
    if (error.oclif && !(error instanceof ApiError)) return super.catch(error);
    const { code, exit } =
      error instanceof ConfigError
        ? { code: 'invalid_configuration', exit: 78 }
        : error instanceof ApiError
          ? { code: error.code, exit: error.status === 404 ? 4 : 1 }
          : { code: 'error', exit: 1 };
    const message = error instanceof ApiError ? `${error.code}: ${error.message}` : error.message;
    if (this.jsonEnabled()) {
      this.logJson({ error: { code, message: error.message } });
      this.exit(exit);
    }
    this.error(printable(message, true), { exit });
  }
}

/** Parses `24h`, `30m`, `90s`, `7d` or plain seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+)\s*([smhd]?)$/.exec(text.trim());
  if (!match) throw new Error(`"${text}" is not a duration; use e.g. 90s, 30m, 24h or 7d.`);
  const unit = { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
  return Number(match[1]) * unit;
}
