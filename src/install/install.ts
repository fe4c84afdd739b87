import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../clock/clock.js';
import { CONFIG_FILE, loadConfig } from '../config/load-config.js';
import { maskUrl } from '../db/database-url.js';
import { openDatabase } from '../db/database.js';
import { checkDatabaseUrl } from './check-database-url.js';
import { migrateUp } from '../db/migrations.js';
import { currentBuild, refuseUnderRunningServers } from '../processes/presence.js';
import { createApiKey } from '../keys/keys.js';
import { createOrganisation, listOrganisations, type Organisation } from '../orgs/orgs.js';
import {
  DEFAULT_ORGANISATION_NAME,
  DEFAULT_PUBLISHABLE_KEY_NAME,
  DEFAULT_SECRET_KEY_NAME,
} from '../orgs/default-names.js';
import { createMasterKeyFile } from '../secrets/master-key-file.js';
import { ensureTestCa, testCaDirectory } from '../consent-bank/test-ca.js';

export interface InstallOptions {
  home: string;
  env: Record<string, string | undefined>;
  databaseUrl?: string;
  brand?: string;
  clock: Clock;
  actor: string;
  /** svc's version, for messages; the migrations on disk say which build a running server must match. */
  version?: string;
  /**
   * On an installation that exists, issue a new pair of test keys for its first organisation (a first
   * install issues them anyway): how a walk-through is run again on the same data directory.
   */
  newKeys?: boolean;
}

export interface InstallResult {
  home: string;
  configFile: string;
  masterKeyFile: string;
  database: string;
  migrationsApplied: string[];
  createdMasterKey: boolean;
  /** The organisation the keys were issued for: on the run that created it, or with `newKeys`. */
  organisation: Organisation | null;
  /** Test keys, shown once: on the run that created the organisation, or with `newKeys`. */
  keys?: { secret: string; publishable: string };
  /** The installation existed before this run. */
  alreadyInstalled: boolean;
  /** Without keys, the command that issues a new pair. */
  newKeysCommand?: string;
}

/**
 * Creates what is missing and leaves what exists: running it again changes nothing. It never overwrites a
 * master key or a database, and prints keys only on the run that created them.
 */
export async function install(options: InstallOptions): Promise<InstallResult> {
  const configFile = join(options.home, CONFIG_FILE);
  // Everything that can refuse the flags does so before the first write, so that a corrected re-run is
  // a first install again: a contradiction of the saved settings, a value the schema refuses, a database
  // that does not answer.
  refuseContradictions(configFile, options);
  if (options.databaseUrl !== undefined) await checkDatabaseUrl(options.databaseUrl);
  loadConfig({
    home: options.home,
    env: options.env,
    overrides: { brand: options.brand, databaseUrl: options.databaseUrl },
  });

  mkdirSync(options.home, { recursive: true, mode: 0o700 });
  makePrivate(options.home);
  writeConfigFile(configFile, options);

  const config = loadConfig({ home: options.home, env: options.env });
  const db = openDatabase({ url: config.databaseUrl });
  try {
    // An upgrade's install.sh runs this: it migrates only with no server of another build running.
    const guard = refuseUnderRunningServers(
      db,
      await currentBuild(options.version ?? 'unknown'),
      options.home,
      'svc install',
    );
    const applied = await migrateUp(db, { guard });
    const hasOrganisations = (await db.knex('organisations').first('id')) !== undefined;

    let createdMasterKey = false;
    if (config.masterKey === '' && !existsSync(config.masterKeyFile)) {
      if (hasOrganisations) {
        throw new Error(
          `The database at ${db.describe()} holds data but ${config.masterKeyFile} is missing. Restore the master key from your backup; creating a new one would make stored secrets unreadable.`,
        );
      }
      createMasterKeyFile(config.masterKeyFile, new Date(options.clock.now()));
      createdMasterKey = true;
    }
    // The simulated consent bank's test CA (docs/open-finance.md): made once, kept on later runs. Its
    // certificates' validity is on the system clock, which TLS checks them against, not the injected one.
    await ensureTestCa(testCaDirectory(options.home), Date.now());

    let organisation: Organisation | null = null;
    let keys: InstallResult['keys'];
    if (!hasOrganisations || options.newKeys) {
      const now = options.clock.now();
      ({ organisation, keys } = await db.transaction(async (trx) => {
        const org = hasOrganisations
          ? (await listOrganisations(trx))[0]!
          : await createOrganisation(trx, DEFAULT_ORGANISATION_NAME, options.actor, now);
        const base = { brand: config.brand, orgId: org.id, mode: 'test' as const, actor: options.actor, now };
        const secret = await createApiKey(trx, { ...base, type: 'secret', name: DEFAULT_SECRET_KEY_NAME });
        const publishable = await createApiKey(trx, {
          ...base,
          type: 'publishable',
          name: DEFAULT_PUBLISHABLE_KEY_NAME,
        });
        return { organisation: org, keys: { secret: secret.secret, publishable: publishable.secret } };
      }));
    }
    return {
      home: options.home,
      configFile,
      masterKeyFile: config.masterKeyFile,
      database: db.describe(),
      migrationsApplied: applied,
      createdMasterKey,
      organisation,
      alreadyInstalled: hasOrganisations,
      ...(keys ? { keys } : { newKeysCommand: `svc install --home ${options.home} --new-keys` }),
    };
  } finally {
    await db.close();
  }
}

/**
 * Tightens a data directory made before svc created its files privately (by hand, or restored from a
 * backup with a loose umask): no directory or file keeps a permission for the group or others (0700
 * directories, 0600 files). Symbolic links are left alone, and so is what they point at.
 */
export function makePrivate(directory: string): void {
  keepOwnerOnly(directory);
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) makePrivate(path);
    else if (entry.isFile()) keepOwnerOnly(path);
  }
}

function keepOwnerOnly(path: string): void {
  const mode = statSync(path).mode & 0o777;
  if ((mode & 0o077) === 0) return;
  try {
    chmodSync(path, mode & 0o700);
  } catch (error) {
    throw new Error(
      `Cannot make ${path} private (${(error as NodeJS.ErrnoException).code}): it belongs to another user. Give the data directory to the user that runs svc (chown -R).`,
    );
  }
}

/** Writes the settings chosen at install, unless a config file is there already. */
function writeConfigFile(path: string, options: InstallOptions): void {
  if (existsSync(path)) return;
  const contents: Record<string, string> = {};
  if (options.brand) contents.brand = options.brand;
  if (options.databaseUrl) contents.databaseUrl = options.databaseUrl;
  writeFileSync(path, JSON.stringify(contents, null, 2) + '\n', { mode: 0o600 });
}

/** On a later run, refuses flags that contradict the saved settings. */
function refuseContradictions(path: string, options: InstallOptions): void {
  if (!existsSync(path)) return;
  const existing = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  for (const [key, wanted] of [
    ['brand', options.brand],
    ['databaseUrl', options.databaseUrl],
  ] as const) {
    const current = existing[key] ?? (key === 'brand' ? 'svc' : undefined);
    if (wanted !== undefined && current !== wanted) {
      const show = (value: unknown) =>
        value === undefined ? 'the default SQLite file' : `"${maskUrl(String(value))}"`;
      throw new Error(
        `This installation already uses ${key} ${show(current)} (${path}); svc install will not change it to ${show(wanted)}, because the keys and data already issued depend on it.`,
      );
    }
  }
}
