/**
 * `svc doctor`'s checks, each a pure function from what was observed (probes.ts gathers it) to a verdict
 * and, for a problem, the fix an operator can run. Kept pure so that every verdict and every fix is tested
 * without breaking a machine (test/unit/doctor-checks.test.ts); the e2e test breaks real installations.
 */

import type { CertificateFacts } from '../banks/consent/certificates.js';
import { describeShortfall, type BankCapacity } from '../banks/budget/capacity.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface CheckResult {
  check: string;
  status: CheckStatus;
  detail: string;
  /** What to run or change; null when there is nothing to do. */
  fix: string | null;
}

const ok = (check: string, detail: string): CheckResult => ({ check, status: 'ok', detail, fix: null });
const warn = (check: string, detail: string, fix: string): CheckResult => ({
  check,
  status: 'warn',
  detail,
  fix,
});
const fail = (check: string, detail: string, fix: string): CheckResult => ({
  check,
  status: 'fail',
  detail,
  fix,
});

/**
 * Each consent bank whose links cannot all be synced once an interval within the scheduled share of its
 * budget (banks/budget/capacity.ts): syncs fall behind until the bank allows more, links are fewer, or the
 * interval is longer.
 */
export function checkBankBudgets(capacities: readonly BankCapacity[], intervalMinutes: number): CheckResult {
  const short = capacities.filter((capacity) => !capacity.fits);
  if (short.length === 0)
    return ok(
      'bank-budgets',
      capacities.length === 0
        ? 'no consent bank synced yet'
        : capacities
            .map(
              (c) =>
                `${c.bankId} (${c.mode}): ${c.needed} of ${c.available} calls an interval, every link synced every ${c.intervalMinutes} minutes`,
            )
            .join('; '),
    );
  return warn(
    'bank-budgets',
    short.map((capacity) => describeShortfall(capacity, intervalMinutes)).join('; '),
    "Raise scheduler.syncIntervalMinutes, or the bank's budget if it allows more (banks.budgets.<bank> in config.json).",
  );
}

/** package.json's engines: what the code is tested on and uses (fs.statfs, Array.prototype.toSorted...). */
export const REQUIRED_NODE = '20.17.0';

export function checkNode(version: string, required = REQUIRED_NODE): CheckResult {
  const parse = (v: string) => v.replace(/^v/, '').split('.').map(Number);
  const [have, want] = [parse(version), parse(required)];
  for (let i = 0; i < 3; i++) {
    if ((have[i] ?? 0) > (want[i] ?? 0)) break;
    if ((have[i] ?? 0) < (want[i] ?? 0))
      return fail(
        'node',
        `Node.js ${version}; svc needs ${required} or later`,
        `Install Node.js 20.17 or later (20, 22 or 24 LTS) and run ./install.sh again.`,
      );
  }
  return ok('node', `Node.js ${version}`);
}

export interface ConfigFacts {
  file: string;
  exists: boolean;
  /** Why the settings could not be loaded (a bad value names its key), if they could not. */
  error: string | null;
}

export function checkConfig(facts: ConfigFacts): CheckResult {
  if (facts.error)
    return fail('config', facts.error, `Correct the setting in ${facts.file} or the environment.`);
  if (!facts.exists)
    return warn(
      'config',
      `no ${facts.file}: defaults and SVC_* variables only`,
      'Run `svc install` to create it (or check --home / SVC_HOME).',
    );
  return ok('config', facts.file);
}

export interface DataDirFacts {
  home: string;
  exists: boolean;
  isDirectory: boolean;
  /** Directories and files that group or others may use (they should be 0700 and 0600), with their modes. */
  loose: { path: string; mode: number }[];
  /** An entry that could not be examined (another owner, a vanished file), with the reason. */
  error: string | null;
}

const octal = (mode: number) => `0${(mode & 0o777).toString(8)}`;

export function checkDataDir(facts: DataDirFacts): CheckResult {
  if (!facts.exists)
    return fail(
      'data-dir',
      `${facts.home} does not exist`,
      'Run `svc install` (or check --home / SVC_HOME).',
    );
  if (!facts.isDirectory)
    return fail(
      'data-dir',
      `${facts.home} is not a directory`,
      'Point --home or SVC_HOME at the data directory.',
    );
  if (facts.error)
    return fail('data-dir', facts.error, `Give ${facts.home} to the user that runs svc (chown -R).`);
  if (facts.loose.length > 0) {
    const shown = facts.loose
      .slice(0, 3)
      .map((entry) => `${entry.path} ${octal(entry.mode)}`)
      .join(', ');
    const more = facts.loose.length > 3 ? ` and ${facts.loose.length - 3} more` : '';
    return fail(
      'data-dir',
      `open to other users: ${shown}${more} (want 0700 directories, 0600 files)`,
      `Run \`svc install\` (it tightens them) or \`chmod -R go-rwx ${facts.home}\`.`,
    );
  }
  return ok('data-dir', `${facts.home}: directories 0700, files 0600`);
}

export interface MasterKeyFacts {
  source: 'environment' | 'file';
  file: string;
  exists: boolean;
  mode: number | null;
  /** Why the key could not be read or is malformed (the reader's own message), if so. */
  error: string | null;
  /** The outcome of opening one stored secret with it, when the database could be read. */
  trial:
    | { kind: 'opened'; where: string }
    | { kind: 'failed'; where: string; reason: string }
    | { kind: 'nothing-stored' }
    | { kind: 'not-tried'; reason: string };
}

export function checkMasterKey(facts: MasterKeyFacts): CheckResult {
  const name = facts.source === 'environment' ? 'SVC_MASTER_KEY' : facts.file;
  if (facts.source === 'file') {
    if (!facts.exists)
      return fail(
        'master-key',
        `${facts.file} is missing: stored bank logins and webhook secrets cannot be read`,
        `Restore ${facts.file} from your backup (mode 0600). On a new installation with no data, \`svc install\` creates one.`,
      );
    if (facts.mode !== null && (facts.mode & 0o077) !== 0)
      return fail(
        'master-key',
        `${facts.file} is ${octal(facts.mode)}: other users may read it, and svc refuses it`,
        `chmod 600 ${facts.file}`,
      );
  }
  if (facts.error) return fail('master-key', facts.error, `Restore ${name} from your backup.`);
  switch (facts.trial.kind) {
    case 'opened':
      return ok('master-key', `${name}: present, private, opens a stored secret (${facts.trial.where})`);
    case 'failed':
      return fail(
        'master-key',
        `${name} does not open a stored secret (${facts.trial.where}: ${facts.trial.reason})`,
        `Restore the master key file that sealed this database's secrets from your backup.`,
      );
    case 'nothing-stored':
      return ok('master-key', `${name}: present and private; no stored secret yet to try it on`);
    case 'not-tried':
      return warn(
        'master-key',
        `${name}: present and private; not tried on a stored secret (${facts.trial.reason})`,
        'Fix the database first, then run svc doctor again.',
      );
  }
}

export interface DatabaseFacts {
  where: string;
  engine: 'sqlite' | 'postgres';
  /** The SQLite file is missing: nothing was opened (doctor creates nothing). */
  missing: boolean;
  error: string | null;
}

export function checkDatabase(facts: DatabaseFacts): CheckResult {
  if (facts.missing) return fail('database', `${facts.where} does not exist`, 'Run `svc install`.');
  if (facts.error)
    return fail(
      'database',
      `${facts.where}: ${facts.error}`,
      facts.engine === 'sqlite'
        ? 'Check that the file is an svc database that this user can read and write; restore it from a backup if not.'
        : 'Start the database server, or correct databaseUrl (config.json or SVC_DATABASE_URL).',
    );
  return ok('database', `${facts.where} answers`);
}

export interface SchemaFacts {
  applied: string[];
  pending: string[];
  unknown: string[];
}

export function checkSchema(facts: SchemaFacts | null, why = 'the database does not answer'): CheckResult {
  if (!facts) return warn('schema', `not checked: ${why}`, 'Fix the database first.');
  if (facts.applied.length === 0)
    return fail('schema', 'the database has no svc tables', 'Run `svc install`.');
  if (facts.unknown.length > 0)
    return fail(
      'schema',
      `newer than this svc (it has ${facts.unknown.join(', ')})`,
      'Upgrade svc to the version that migrated it.',
    );
  if (facts.pending.length > 0)
    return fail(
      'schema',
      `${facts.pending.length} pending migration(s): ${facts.pending.join(', ')}; svc serve refuses to start`,
      'Run `svc migrate`.',
    );
  return ok('schema', `all ${facts.applied.length} migrations applied (${facts.applied.at(-1)})`);
}

export interface PortFacts {
  name: 'api-port' | 'metrics-port';
  setting: string;
  host: string;
  port: number;
  /** free: nothing listens; ours: `svc serve` from this home holds it; taken: something else does. */
  state: 'off' | 'free' | 'ours' | 'taken' | 'error';
  /** The supervisor that holds it, or the bind error. */
  detail: string | null;
}

export function checkPort(facts: PortFacts): CheckResult {
  const address = `${facts.host}:${facts.port}`;
  const api = facts.name === 'api-port';
  const variable = api ? 'SVC_API_PORT' : 'SVC_METRICS_PORT';
  // Metrics are an aid: svc serve starts without them when their port is taken (processes/roles.ts), so a
  // busy metrics port is a warning; without its API port svc serve refuses to start.
  const verdict = api ? fail : warn;
  const consequence = api ? 'svc serve cannot listen' : 'svc serve starts without metrics';
  switch (facts.state) {
    case 'off':
      return ok(facts.name, `${facts.setting} is 0: off`);
    case 'free':
      return ok(facts.name, `${address} is free`);
    case 'ours':
      return ok(
        facts.name,
        `${address} is held by svc serve from this home${facts.detail ? ` (${facts.detail})` : ''}`,
      );
    case 'taken':
      return verdict(
        facts.name,
        `${address} is held by another program${facts.detail ? ` (${facts.detail})` : ''}: ${consequence}`,
        `Stop what listens on ${address} (\`ss -ltnp 'sport = :${facts.port}'\` names it), or set ${facts.setting} (${variable}) to a free port.`,
      );
    case 'error':
      return verdict(
        facts.name,
        `cannot listen on ${address}: ${facts.detail}; ${consequence}`,
        `Set ${facts.setting} (${variable}) or the host to an address of this machine that this user may bind.`,
      );
  }
}

export interface ClockFacts {
  engine: 'sqlite' | 'postgres';
  offsetMs: number;
  /** Database server time minus this machine's, when it could be read (Postgres). */
  skewMs: number | null;
}

/** Leases, key expiry and rate-limit windows compare times from every process and the database. */
export const CLOCK_WARN_MS = 2_000;
export const CLOCK_FAIL_MS = 30_000;

export function checkClock(facts: ClockFacts): CheckResult {
  const offset =
    facts.offsetMs !== 0 ? `clockOffsetMs is ${facts.offsetMs} (every svc process runs shifted)` : null;
  if (facts.skewMs !== null && Math.abs(facts.skewMs) >= CLOCK_WARN_MS) {
    const detail = `this machine is ${Math.abs(Math.round(facts.skewMs / 1000))} s ${
      facts.skewMs > 0 ? 'behind' : 'ahead of'
    } the database server`;
    const fix =
      'Synchronise both clocks (systemd-timesyncd or chrony: `timedatectl set-ntp true`); leases and key expiry compare them.';
    return Math.abs(facts.skewMs) >= CLOCK_FAIL_MS ? fail('clock', detail, fix) : warn('clock', detail, fix);
  }
  if (offset)
    return warn(
      'clock',
      offset,
      'Remove clockOffsetMs (SVC_CLOCK_OFFSET_MS) unless this is a drill: it is for tests.',
    );
  return ok(
    'clock',
    facts.skewMs === null
      ? 'no database server clock to compare (SQLite)'
      : `within ${Math.round(Math.abs(facts.skewMs))} ms of the database server`,
  );
}

export interface DiskFacts {
  path: string;
  freeBytes: number | null;
  totalBytes: number | null;
  error: string | null;
}

export const DISK_WARN_BYTES = 1024 ** 3;
export const DISK_WARN_SHARE = 0.05;

export function formatGiB(bytes: number): string {
  return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
}

export function checkDisk(facts: DiskFacts): CheckResult {
  if (facts.error || facts.freeBytes === null || facts.totalBytes === null)
    return warn(
      'disk',
      `cannot read free space of ${facts.path}: ${facts.error}`,
      'Check the data directory.',
    );
  const share = facts.totalBytes > 0 ? facts.freeBytes / facts.totalBytes : 1;
  const detail = `${formatGiB(facts.freeBytes)} free of ${formatGiB(facts.totalBytes)} (${Math.round(share * 100)}%) at ${facts.path}`;
  if (facts.freeBytes < DISK_WARN_BYTES || share < DISK_WARN_SHARE)
    return warn(
      'disk',
      detail,
      'Free space on that file system (old logs, backups) or move the data directory: SQLite and its WAL stop writing when it is full.',
    );
  return ok('disk', detail);
}

export interface ConnectorFacts {
  bank: string;
  url: string;
  /** A known bank code (banks/institutions.ts). */
  knownBank: boolean;
  secretLength: number;
  /** The outcome of opening a TCP connection to the URL's host and port (no request is sent). */
  reach: { kind: 'open' } | { kind: 'refused'; reason: string } | { kind: 'bad-url'; reason: string };
}

export function checkConnectors(connectors: ConnectorFacts[]): CheckResult[] {
  if (connectors.length === 0)
    return [ok('connectors', 'none configured: live mode has no bank (test mode uses the sandbox)')];
  return connectors.map((c) => {
    const name = `connector ${c.bank}`;
    if (!c.knownBank)
      return fail(name, `${c.bank} is not a bank svc knows`, 'Use a bank code from GET /v1/institutions.');
    if (c.reach.kind === 'bad-url')
      return fail(
        name,
        `${c.url}: ${c.reach.reason}`,
        `Set banks.connectors.${c.bank}.url to http(s)://host:port of its gateway.`,
      );
    if (c.secretLength < 16)
      return fail(
        name,
        'its secret is shorter than 16 characters',
        `Set banks.connectors.${c.bank}.secret to the gateway's secret.`,
      );
    if (c.reach.kind === 'refused')
      return fail(
        name,
        `${c.url} does not accept connections (${c.reach.reason}): live syncs of ${c.bank} fail`,
        `Start the gateway at ${c.url}, or correct banks.connectors.${c.bank}.url.`,
      );
    return ok(name, `${c.url} accepts connections`);
  });
}

/** A client certificate this close to its end is a warning: a renewal at a bank takes days. */
export const CERTIFICATE_WARN_DAYS = 30;

export interface ConsentClientFacts {
  bank: string;
  mode: 'live' | 'test';
  /** The registration's certificate and key, or why they could not be read. */
  certificate: CertificateFacts | { error: string };
  /** The bank's discovery document at its issuer. */
  discovery: { kind: 'ok' } | { kind: 'failed'; reason: string };
  /**
   * Whether the bank gave the registration RFC 7592 management (a client URI and a registration access
   * token): then a new certificate replaces the old one on the same client (`svc banks rotate-certificate`).
   */
  manageable: boolean;
  /** What the bank registered short of what the appliance asked for (register.ts, registrationGaps). */
  gaps?: readonly string[];
  now: number;
}

/**
 * What to run for a certificate that is ending or has ended: a rotation keeps the client id and so every
 * consent; registering again makes a new client whose links must all be renewed by their users.
 */
export function renewalCommand(client: Pick<ConsentClientFacts, 'bank' | 'mode' | 'manageable'>): string {
  return client.manageable
    ? `Get a new certificate from a CA the bank accepts, then: svc banks rotate-certificate ${client.bank} --mode ${client.mode} --cert NEW_CERT.pem --key NEW_KEY.pem`
    : `Get a new certificate from a CA the bank accepts, then: svc banks register ${client.bank} --mode ${client.mode} … --cert NEW_CERT.pem --key NEW_KEY.pem (the bank offers no RFC 7592 management: a new client, whose consent links must be renewed by their users)`;
}

/** One line per consent client registration (`svc banks register`): its certificate, key and bank. */
export function checkConsentClients(clients: ConsentClientFacts[]): CheckResult[] {
  return clients.map((client) => {
    const name = `consent client ${client.bank} (${client.mode})`;
    const again = `svc banks register ${client.bank} --mode ${client.mode} … with a valid certificate and key`;
    const facts = client.certificate;
    if ('error' in facts) return fail(name, facts.error, again);
    if (facts.keyMatches === false) return fail(name, 'the stored key does not match the certificate', again);
    if (facts.chainProblem !== null) return fail(name, facts.chainProblem, again);
    const days = Math.floor((facts.notAfter - client.now) / 86_400_000);
    const until = new Date(facts.notAfter).toISOString().slice(0, 10);
    if (facts.notBefore > client.now)
      return fail(
        name,
        `its certificate is valid only from ${new Date(facts.notBefore).toISOString()}`,
        again,
      );
    if (facts.notAfter <= client.now)
      return fail(
        name,
        `its certificate expired on ${until}: the bank refuses every call`,
        renewalCommand(client),
      );
    if (client.discovery.kind === 'failed')
      return fail(
        name,
        `the bank's discovery does not answer (${client.discovery.reason})`,
        `Check the bank's issuer URL and this machine's route to it; register again if it moved.`,
      );
    if (client.gaps && client.gaps.length > 0)
      return fail(
        name,
        `${client.gaps.join('; ')}: consents at this bank will fail`,
        `Register again (svc banks register ${client.bank} --mode ${client.mode} …); if the bank keeps refusing, ask it to allow these settings for the appliance's software statement.`,
      );
    if (days < CERTIFICATE_WARN_DAYS)
      return warn(name, `its certificate ends on ${until}, in ${days} days`, renewalCommand(client));
    return ok(name, `certificate ${facts.subjectDn} valid until ${until}; the bank's discovery answers`);
  });
}

export interface SimulatedBankFacts {
  enabled: boolean;
  /** `<home>/consent-bank/`, where `svc install` makes the test CA. */
  directory: string;
  /** The CA material: missing, unreadable (why), or the dates of its certificates by file. */
  material:
    | { kind: 'missing' }
    | { kind: 'unreadable'; reason: string }
    | { kind: 'ok'; certificates: { file: string; notBefore: number; notAfter: number }[] };
  now: number;
  /** Working live-mode API keys of every organisation; null when the database could not be read. */
  liveKeys?: number | null;
  /** Where its sign-in pages listen (`127.0.0.1:8445`). */
  pagesAddress?: string;
}

/**
 * The simulated consent bank of test mode (`sandbox.consentBank`). The API serves on without it, so a
 * missing CA is a warning; certificates out of date are a failure, since the bank would start and then
 * refuse every TLS handshake (its certificates last 2 years, the CA 10).
 */
export function checkSimulatedBank(facts: SimulatedBankFacts): CheckResult {
  const name = 'consent-bank';
  if (!facts.enabled) return ok(name, 'sandbox.consentBank.enabled is false: not served');
  const renew = `Move ${facts.directory} aside and run \`svc install\`: it makes a new test CA (the appliance registers with the bank again at its next start; test-mode consent links made before must be linked again).`;
  if (facts.material.kind === 'missing')
    return warn(
      name,
      `no test CA in ${facts.directory}: svc serve runs without the simulated bank`,
      'Run `svc install` (it makes the test CA and keeps everything else), then restart svc serve.',
    );
  if (facts.material.kind === 'unreadable')
    return fail(name, `the test CA in ${facts.directory} cannot be read (${facts.material.reason})`, renew);
  const day = (at: number) => new Date(at).toISOString().slice(0, 10);
  const early = facts.material.certificates.find((c) => c.notBefore > facts.now);
  if (early) return fail(name, `${early.file} is valid only from ${day(early.notBefore)}`, renew);
  const expired = facts.material.certificates.find((c) => c.notAfter <= facts.now);
  if (expired)
    return fail(name, `${expired.file} expired on ${day(expired.notAfter)}: the bank's TLS fails`, renew);
  const first = facts.material.certificates.reduce((a, b) => (b.notAfter < a.notAfter ? b : a));
  const days = Math.floor((first.notAfter - facts.now) / 86_400_000);
  if (days < CERTIFICATE_WARN_DAYS)
    return warn(name, `${first.file} ends on ${day(first.notAfter)}, in ${days} days`, renew);
  // A test aid on a box that serves live tenants (issue 44, item 7): its sign-in pages take any sandbox RUT,
  // so an installation with live keys should not run it unless someone means to.
  if ((facts.liveKeys ?? 0) > 0)
    return warn(
      name,
      `the simulated consent bank is on in an installation with ${facts.liveKeys} live API key${facts.liveKeys === 1 ? '' : 's'}: its sign-in pages listen on ${facts.pagesAddress ?? 'their own port'}`,
      'Unless this box is for testing, set sandbox.consentBank.enabled to false (SVC_SANDBOX_CONSENT_BANK_ENABLED=false) and restart svc serve.',
    );
  return ok(name, `test CA in ${facts.directory}; its certificates are valid until ${day(first.notAfter)}`);
}

export interface RetentionFacts {
  eventsDays: number;
  jobsDays: number;
  bankOutcomesDays: number;
  refreshIntentsDays: number;
  widgetTokensDays: number;
  auditLogDays: number;
}

/**
 * What housekeeping keeps, in one line. Keeping the audit log forever is the default and fine (it grows
 * with operator actions); the other kinds grow with every sync and event, so 0 there is a warning.
 */
export function checkRetention(facts: RetentionFacts): CheckResult {
  const kinds = [
    ['events', 'eventsDays'],
    ['jobs', 'jobsDays'],
    ['bank outcomes', 'bankOutcomesDays'],
    ['refresh intents', 'refreshIntentsDays'],
    ['widget tokens', 'widgetTokensDays'],
    ['audit log', 'auditLogDays'],
  ] as const;
  const kept = (days: number) => (days === 0 ? 'kept forever' : `${days} d`);
  const detail = `${kinds.map(([label, key]) => `${label} ${kept(facts[key])}`).join(', ')}; movements never pruned`;
  const forever = kinds.filter(([, key]) => key !== 'auditLogDays' && facts[key] === 0);
  if (forever.length > 0)
    return warn(
      'retention',
      detail,
      `${forever.map(([label]) => label).join(', ')} grow without bound: set ${forever
        .map(([, key]) => `retention.${key}`)
        .join(', ')} to a number of days (README, configuration).`,
    );
  return ok('retention', detail);
}

/** Whether the report has a failure: `svc doctor` then exits 1. */
export function hasFailure(checks: readonly CheckResult[]): boolean {
  return checks.some((check) => check.status === 'fail');
}
