import { countLiveModeKeys } from '../keys/keys.js';
import { pagesPort } from '../test-mode/pages-port.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { bankIdsOf, findInstitution, institutionsOf } from '../banks/institutions.js';
import { testCaDirectory } from '../consent-bank/test-ca.js';
import type { Config } from '../config/defaults.js';
import { CONFIG_FILE } from '../config/load-config.js';
import { maskUrl } from '../db/database-url.js';
import { engineOf, openDatabase, sqlitePath, type Database } from '../db/database.js';
import { migrationStatus } from '../db/migrations.js';
import { serverClockSkewMs } from '../db/server-clock.js';
import { runningSupervisors } from '../processes/status.js';
import { CertificateError, certificateFacts } from '../banks/consent/certificates.js';
import { gapsOfRegistration } from '../banks/consent/register.js';
import { listRegistrations, openPrivateKey } from '../banks/consent/registrations.js';
import type { SecretBox } from '../secrets/secret-box.js';
import { loadSecretBox } from '../secrets/master-key-file.js';
import { bankCapacities, capacitySettingsOf } from '../banks/budget/capacity.js';
import {
  checkBankBudgets,
  checkClock,
  checkConfig,
  checkConnectors,
  checkConsentClients,
  checkDataDir,
  checkDatabase,
  checkDisk,
  checkMasterKey,
  checkNode,
  checkPort,
  checkRetention,
  checkSchema,
  checkSimulatedBank,
  hasFailure,
  type CheckResult,
  type ConnectorFacts,
  type ConsentClientFacts,
  type MasterKeyFacts,
  type SchemaFacts,
} from './checks.js';
import {
  answersLikeOurApi,
  probeDataDir,
  probeDisk,
  probeDiscovery,
  probeMasterKeyFile,
  probePort,
  probeTcp,
  probeTestCa,
  trySealedValue,
} from './probes.js';

export interface DoctorReport {
  ok: boolean;
  checks: CheckResult[];
}

/**
 * Every check in the order an operator fixes them: the runtime, the files, the database, then what runs
 * beside it. A problem upstream does not hide the others: each check looks for itself, and one that needs
 * the database says so when it cannot have it. Creates nothing: a missing SQLite file is not opened.
 */
export async function runDoctor(
  config: Readonly<Config>,
  options: { nodeVersion?: string } = {},
): Promise<DoctorReport> {
  const checks: CheckResult[] = [checkNode(options.nodeVersion ?? process.version)];
  const configFile = join(config.home, CONFIG_FILE);
  checks.push(checkConfig({ file: configFile, exists: existsSync(configFile), error: null }));
  checks.push(checkDataDir(probeDataDir(config.home)));

  const engine = engineOf(config.databaseUrl);
  const missing = engine === 'sqlite' && !existsSync(sqlitePath(config.databaseUrl));
  let db: Database | null = null;
  let where = engine === 'sqlite' ? `sqlite ${sqlitePath(config.databaseUrl)}` : 'postgres';
  let dbError: string | null = null;
  if (!missing) {
    db = openDatabase({ url: config.databaseUrl, quiet: true });
    where = db.describe();
    try {
      await db.ping(10_000);
    } catch (error) {
      dbError = (error as Error).message || String(error);
    }
  }
  const usable = db !== null && dbError === null ? db : null;
  try {
    let schema: SchemaFacts | null = null;
    if (usable) {
      try {
        schema = await migrationStatus(usable);
      } catch (error) {
        dbError = (error as Error).message;
      }
    }
    checks.push(
      checkMasterKey(
        await masterKeyFacts(
          config,
          schema && schema.applied.length > 0 ? usable : null,
          missing || dbError !== null,
        ),
      ),
    );
    checks.push(checkDatabase({ where, engine, missing, error: dbError }));
    checks.push(checkSchema(usable && dbError === null ? schema : null, missing ? 'no database' : undefined));

    const supervisors = runningSupervisors(config.home);
    const pids = supervisors.filter((s) => s.roles.includes('api')).map((s) => s.pid);
    checks.push(
      checkPort(
        await probePort('api-port', 'api.port', config.api.host, config.api.port, {
          pids,
          isOurs: () => answersLikeOurApi(config.api.host, config.api.port),
        }),
      ),
    );
    checks.push(
      checkPort(
        await probePort('metrics-port', 'metrics.port', config.metrics.host, config.metrics.port, {
          pids,
          // The API process serves the metrics; with our API up on its port, this one is its too.
          isOurs: () => answersLikeOurApi(config.api.host, config.api.port),
        }),
      ),
    );

    let skewMs: number | null = null;
    if (usable && engine === 'postgres') skewMs = await serverClockSkewMs(usable).catch(() => null);
    checks.push(checkClock({ engine, offsetMs: config.clockOffsetMs, skewMs }));
    checks.push(checkDisk(probeDisk(existsSync(config.home) ? config.home : '/')));
    checks.push(checkRetention(config.retention));
    checks.push(...checkConnectors(await connectorFacts(config)));
    const bankDirectory = testCaDirectory(config.home);
    const bank = config.sandbox.consentBank;
    checks.push(
      checkSimulatedBank({
        enabled: bank.enabled,
        directory: bankDirectory,
        material: bank.enabled ? probeTestCa(bankDirectory) : { kind: 'missing' },
        now: Date.now(),
        liveKeys:
          usable && bank.enabled
            ? await countLiveModeKeys(usable.reader, Date.now()).catch(() => null)
            : null,
        pagesAddress: `${bank.host}:${pagesPort(bank.port)}`,
      }),
    );
    if (usable) checks.push(...checkConsentClients(await consentClientFacts(usable, config)));
    // Null before migration 025 (its table is missing): the schema check above says what to run.
    const capacities = usable
      ? await bankCapacities(usable.reader, capacitySettingsOf(config)).catch(() => null)
      : null;
    if (capacities) checks.push(checkBankBudgets(capacities, config.scheduler.syncIntervalMinutes));
  } finally {
    await db?.close();
  }
  return { ok: !hasFailure(checks), checks };
}

async function masterKeyFacts(
  config: Readonly<Config>,
  db: Database | null,
  databaseBroken: boolean,
): Promise<MasterKeyFacts> {
  const source = config.masterKey !== '' ? 'environment' : 'file';
  const file = probeMasterKeyFile(config.masterKeyFile);
  const facts: MasterKeyFacts = {
    source,
    file: config.masterKeyFile,
    ...(source === 'file' ? file : { exists: true, mode: null }),
    error: null,
    trial: {
      kind: 'not-tried',
      reason: databaseBroken ? 'the database cannot be read' : 'no svc tables yet',
    },
  };
  if (source === 'file' && (!facts.exists || (facts.mode! & 0o077) !== 0)) return facts;
  let box;
  try {
    box = loadSecretBox(config);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    facts.error = code ? `cannot read ${config.masterKeyFile} (${code})` : (error as Error).message;
    return facts;
  }
  if (db) {
    try {
      facts.trial = await trySealedValue(db, box);
    } catch (error) {
      facts.trial = { kind: 'not-tried', reason: (error as Error).message };
    }
  }
  return facts;
}

async function connectorFacts(config: Readonly<Config>): Promise<ConnectorFacts[]> {
  const facts: ConnectorFacts[] = [];
  for (const [bank, entry] of Object.entries(config.banks.connectors)) {
    let reach: ConnectorFacts['reach'];
    try {
      const url = new URL(entry.url);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http or https');
      const tcp = await probeTcp(entry.url);
      reach = tcp.open ? { kind: 'open' } : { kind: 'refused', reason: tcp.reason };
    } catch (error) {
      reach = { kind: 'bad-url', reason: (error as Error).message };
    }
    facts.push({
      bank,
      url: maskUrl(entry.url),
      knownBank: bankIdsOf(config).includes(bank),
      secretLength: entry.secret.length,
      reach,
    });
  }
  return facts;
}

/** The report when the settings themselves cannot be loaded: what can be checked without them. */
export function configFailureReport(
  home: string,
  message: string,
  nodeVersion = process.version,
): DoctorReport {
  const checks = [
    checkNode(nodeVersion),
    checkConfig({
      file: join(home, CONFIG_FILE),
      exists: existsSync(join(home, CONFIG_FILE)),
      error: message,
    }),
    checkDataDir(probeDataDir(home)),
  ];
  return { ok: false, checks };
}

/** Each consent client registration: its certificate and sealed key as stored, and the bank's discovery. */
async function consentClientFacts(db: Database, config: Readonly<Config>): Promise<ConsentClientFacts[]> {
  // The appliance's own registrations with the simulated banks (Chile's and Brazil's) are svc serve's (their
  // discovery answers only while serve runs): the simulated bank's check covers them.
  const rows = (await listRegistrations(db.reader)).filter(
    (row) => !(findInstitution(row.bank_id)?.consentSandbox === true && row.mode === 'test'),
  );
  if (rows.length === 0) return [];
  let box: SecretBox | null = null;
  try {
    box = loadSecretBox(config);
  } catch {
    // The master key's own check says why; each registration says it cannot read its key.
  }
  const now = Date.now();
  return Promise.all(
    rows.map(async (row) => {
      let certificate: ConsentClientFacts['certificate'];
      try {
        const key = box ? openPrivateKey(row, box) : null;
        certificate = key
          ? certificateFacts(row.certificate_pem, key)
          : { error: 'its private key cannot be opened: the master key is not readable' };
      } catch (error) {
        certificate = {
          error:
            error instanceof CertificateError
              ? error.message
              : 'its private key cannot be opened with this master key',
        };
      }
      return {
        bank: row.bank_id,
        mode: row.mode,
        certificate,
        discovery: await probeDiscovery(row),
        manageable: row.registration_client_uri !== null && row.registration_access_token_sealed !== null,
        gaps: gapsOfRegistration(row, institutionsOf(config)),
        now,
      };
    }),
  );
}
