/* The pure half of `svc upgrade` (docs/upgrade.md): what to do, decided from facts the edges gathered. */

export const STEP_NAMES = ['check', 'backup', 'stop', 'swap', 'migrate', 'start', 'health'] as const;
export type StepName = (typeof STEP_NAMES)[number];

/** From `swap` on, a failure puts the previous build back (and from `migrate` on, the backup too). */
export function needsRollback(step: StepName): boolean {
  return STEP_NAMES.indexOf(step) >= STEP_NAMES.indexOf('swap');
}

export interface Build {
  version: string;
  commit: string | null;
  dirty: boolean;
}

/** `0.8.0 (commit 1a2b3c4d5e6f)`, or `0.8.0` outside a git checkout. */
export function describeVersion(build: Build): string {
  if (!build.commit) return build.version;
  return `${build.version} (commit ${build.commit}${build.dirty ? ', with uncommitted changes' : ''})`;
}

/** Semantic versions by precedence: -1, 0 or 1. Build metadata (`+…`) is ignored; a pre-release sorts first. */
export function compareVersions(a: string, b: string): number {
  const parse = (text: string) => {
    const [core = '', pre = ''] = text.split('+')[0]!.split(/-(.*)/s);
    return { parts: core.split('.').map((part) => Number(part) || 0), pre };
  };
  const left = parse(a);
  const right = parse(b);
  for (let i = 0; i < 3; i++) {
    const diff = (left.parts[i] ?? 0) - (right.parts[i] ?? 0);
    if (diff !== 0) return Math.sign(diff);
  }
  if (left.pre === right.pre) return 0;
  if (left.pre === '') return 1;
  if (right.pre === '') return -1;
  return left.pre < right.pre ? -1 : 1;
}

export type UpgradeDecision =
  { kind: 'upgrade' } | { kind: 'nothing'; reason: string } | { kind: 'refuse'; reason: string };

/** What the sources in the checkout mean for the build installed beside them. */
export function decide(installed: Build, sources: Build): UpgradeDecision {
  const order = compareVersions(sources.version, installed.version);
  if (order < 0)
    return {
      kind: 'refuse',
      reason: `the sources are version ${sources.version}, older than the installed ${describeVersion(installed)}. svc upgrade does not go back: restore the backup taken before the upgrade (docs/upgrade.md, Going back).`,
    };
  if (order === 0 && sources.commit === installed.commit && !installed.dirty && !sources.dirty)
    return {
      kind: 'nothing',
      reason: `the installed build is already ${describeVersion(installed)}, the version of these sources. Pull the new release first (git pull), then run svc upgrade.`,
    };
  return { kind: 'upgrade' };
}

/** Whether `nodeVersion` (`v20.18.1`) meets package.json's `engines.node` (only the `>=x.y.z` form is used). */
export function nodeMeets(nodeVersion: string, engines: string | undefined): boolean {
  const minimum = /^>=\s*v?(\d+(?:\.\d+){0,2})$/.exec(engines?.trim() ?? '')?.[1];
  if (!minimum) return true;
  return compareVersions(nodeVersion.replace(/^v/, ''), minimum) >= 0;
}

/** One CHANGELOG.md section: its version and its text (heading included). */
export interface ChangelogEntry {
  version: string;
  text: string;
}

/** The sections of CHANGELOG.md (`## [0.8.0] — 2026-11-28`, or `## 0.8.0`), newest first as written. */
export function changelogSections(markdown: string): ChangelogEntry[] {
  const sections: ChangelogEntry[] = [];
  let current: { version: string; lines: string[] } | null = null;
  for (const line of markdown.split('\n')) {
    const heading = /^## \[?v?(\d+\.\d+\.\d+[^\]\s]*)\]?/.exec(line);
    if (heading || /^## /.test(line)) {
      if (current) sections.push({ version: current.version, text: current.lines.join('\n').trim() });
      current = heading ? { version: heading[1]!, lines: [line] } : null;
    } else if (current) current.lines.push(line);
  }
  if (current) sections.push({ version: current.version, text: current.lines.join('\n').trim() });
  return sections;
}

/** What changed from `from` to `to`: the sections strictly after `from` up to and including `to`. */
export function changelogBetween(markdown: string, from: string, to: string): ChangelogEntry[] {
  return changelogSections(markdown).filter(
    (entry) => compareVersions(entry.version, from) > 0 && compareVersions(entry.version, to) <= 0,
  );
}

/**
 * Disk space for the upgrade: the backup (about the database's size; 10% more for the archive's manifest and
 * a margin) on the home's file system, and a second build (the current dist's size, 20% more) on the
 * checkout's, which may be the same file system. 64 MB more either way for logs and temporary files.
 */
export function diskShortfall(facts: {
  databaseBytes: number;
  distBytes: number;
  homeFree: number;
  checkoutFree: number;
  sameFileSystem: boolean;
}): string | null {
  const margin = 64 * 1024 ** 2;
  const backup = Math.ceil(facts.databaseBytes * 1.1) + margin;
  const build = Math.ceil(facts.distBytes * 1.2) + margin;
  const mb = (bytes: number) => `${Math.ceil(bytes / 1024 ** 2)} MB`;
  if (facts.sameFileSystem) {
    if (facts.homeFree < backup + build)
      return `the backup and the new build need about ${mb(backup + build)}; ${mb(facts.homeFree)} are free.`;
    return null;
  }
  if (facts.homeFree < backup)
    return `the backup needs about ${mb(backup)} in the home; ${mb(facts.homeFree)} are free there.`;
  if (facts.checkoutFree < build)
    return `the new build needs about ${mb(build)} in the checkout; ${mb(facts.checkoutFree)} are free there.`;
  return null;
}

/** The systemd unit a process runs in, from /proc/PID/cgroup (`0::/system.slice/svc.service`). */
export function systemdUnit(cgroup: string): string | null {
  for (const line of cgroup.split('\n')) {
    const path = line.split(':').slice(2).join(':');
    const unit = /\/([^/]+\.service)$/.exec(path)?.[1];
    if (unit && !unit.startsWith('user@') && unit !== 'init.scope') return unit;
  }
  return null;
}

/** `--name value` or `--name=value` among `svc serve`'s arguments. */
export function flagValue(args: string[], name: string): string | undefined {
  for (const [i, arg] of args.entries()) {
    if (arg === `--${name}`) return args[i + 1];
    if (arg.startsWith(`--${name}=`)) return arg.slice(name.length + 3);
  }
  return undefined;
}

/** Where a server's /health answers: its flags, else its environment, else the home's config. */
export function healthAddress(
  args: string[],
  env: Record<string, string | undefined>,
  config: { host: string; port: number },
): string {
  let host = flagValue(args, 'host') ?? env.SVC_API_HOST ?? config.host;
  const port = Number(flagValue(args, 'port') ?? env.SVC_API_PORT ?? config.port);
  // A server listening on every address answers on loopback.
  if (host === '0.0.0.0' || host === '::' || host === '') host = '127.0.0.1';
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** The backup's file name: both versions and the time, so a later look at <home>/backups says what it was for. */
export function backupName(from: string, to: string, now: Date): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  const safe = (version: string) => version.replace(/[^0-9A-Za-z.+-]/g, '_');
  return `svc-backup-before-upgrade-${safe(from)}-to-${safe(to)}-${stamp}.tar.gz`;
}

/** `1.2 s`, `2 min 5 s`. */
export function formatSeconds(ms: number): string {
  const seconds = ms / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

/** Another `svc serve` of the checkout, as the refusal names it. */
export interface OtherServer {
  pid: number;
  /** Its data directory; null when this user cannot see it (another user's process). */
  home: string | null;
  terminal: string | null;
  /** How to start it again as it ran (servers.ts's restartCommand), when /proc showed it. */
  restart: string | null;
}

/**
 * Why `svc upgrade` of `home` refuses while servers of other data directories run from the same checkout,
 * and exactly what to run instead. Swapping dist/ changes the files under every process of the checkout:
 * another home's server would go on with the previous build in memory and load the new one's files.
 * With nothing running from `home` and one other home serving, that home is the one to upgrade; otherwise
 * the others are stopped, this one upgraded, and each other home migrated and started again by hand.
 */
export function otherServersRefusal(input: {
  home: string;
  homeServes: boolean;
  others: readonly OtherServer[];
  installed: string;
}): string {
  const named = input.others
    .map(
      (server) =>
        `pid ${server.pid} of ${server.home ?? "another user's data directory (run svc upgrade as root to see which)"}${server.terminal ? ` in the terminal ${server.terminal}` : ''}`,
    )
    .join('; ');
  const lead = `svc serve runs from this checkout for another data directory (${named}): swapping its dist/ would leave ${input.others.length === 1 ? 'that server' : 'those servers'} on ${input.installed} in memory, loading the new build's files.`;
  const homes = [...new Set(input.others.map((server) => server.home))];
  if (!input.homeServes && homes.length === 1 && homes[0] !== null)
    return `${lead} No svc serve runs from ${input.home}, the data directory this upgrade was given (--home, else SVC_HOME, else ~/.svc). Upgrade the one that serves: svc upgrade --home ${homes[0]}`;
  const steps = input.others.map((server) =>
    server.home === null
      ? `pid ${server.pid}: as its user, svc migrate --home ITS_HOME, then start it as before`
      : `svc migrate --home ${server.home}, then ${server.restart ?? `svc serve --home ${server.home} as before`}`,
  );
  return `${lead} Stop ${input.others.length === 1 ? 'it' : 'them'} first (${input.others
    .map((server) => `kill -TERM ${server.pid}${server.terminal ? ', or Ctrl-C in its terminal' : ''}`)
    .join('; ')}), run svc upgrade --home ${input.home} again, then for each: ${steps.join('; ')}.`;
}
