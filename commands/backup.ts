import { rmSync } from 'node:fs';
import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import type { BackupProgress, BackupResult } from '../src/backup/backup.js';

export const BACKUP_WARNING =
  'WARNING: this archive holds the master key. Anyone who has it can read every stored bank credential and webhook signing secret: store it like the key itself (encrypted, offline, few readers). It is created with mode 0600.';

export const ENVIRONMENT_KEY_NOTE =
  'The master key comes from SVC_MASTER_KEY and is NOT in this archive: without it the restored secrets cannot be read, so keep it apart, as safely. The archive is created with mode 0600: it holds the sealed secrets and config.json.';

export default class Backup extends BaseCommand {
  static override summary =
    'Write one archive with a consistent copy of the database, config.json and the master key, while svc serve runs';
  static override description =
    'SQLite is copied with VACUUM INTO (one read transaction beside the running writers); PostgreSQL with pg_dump --format=custom (install postgresql-client). The archive is a .tar.gz (tar -tzf lists it) with a manifest.json holding the svc version, the engine, the migration level and the SHA-256 of every member. See docs/backup.md.';
  static override examples = [
    '<%= config.bin %> backup',
    '<%= config.bin %> backup --out /var/backups/svc/svc-$(date +%F).tar.gz',
    '<%= config.bin %> backup --json',
  ];
  static override flags = {
    out: Flags.string({
      description: 'archive to write; it must not exist (default: ./svc-backup-<UTC time>.tar.gz)',
    }),
  };

  async run(): Promise<BackupResult> {
    const { flags } = await this.parse(Backup);
    const config = this.appConfig(flags.home);
    const { createBackup, defaultArchiveName } = await import('../src/backup/backup.js');
    const clock = this.clock(config);
    const now = () => new Date(clock.now());
    const out = flags.out ?? defaultArchiveName(now());
    // Straight to stderr: oclif mutes logToStderr under --json, and this warning must never be muted.
    process.stderr.write(`${config.masterKey === '' ? BACKUP_WARNING : ENVIRONMENT_KEY_NOTE}\n`);
    // Ctrl-C or a SIGTERM: the working directory holds a copy of the database and a partial archive with the
    // master key; remove it rather than leave it behind.
    let staging: string | null = null;
    const interrupted = (signal: NodeJS.Signals) => {
      if (staging) rmSync(staging, { recursive: true, force: true });
      process.stderr.write(`\nInterrupted (${signal}): no archive was written.\n`);
      process.exit(signal === 'SIGINT' ? 130 : 143);
    };
    process.once('SIGINT', interrupted);
    process.once('SIGTERM', interrupted);
    const result = await createBackup({
      config,
      out,
      svcVersion: this.config.version,
      env: process.env,
      now,
      onProgress: (progress) => this.showProgress(progress),
      onStaging: (directory) => (staging = directory),
    });
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    if (process.stderr.isTTY) process.stderr.write('\n');
    const { formatBytes } = await import('../src/cli/views/format.js');
    const { manifest } = result;
    this.log(`Wrote ${result.file} (${formatBytes(result.bytes)}, mode 0600)`);
    this.log(
      `  database    ${manifest.source.database}, schema ${manifest.database.schema_version ?? '(empty)'}`,
    );
    for (const member of manifest.members)
      this.log(
        `  ${member.name.padEnd(14)}${formatBytes(member.size).padStart(11)}  sha256 ${member.sha256}`,
      );
    this.logToStderr(`Restore with: svc restore ${result.file} --home NEW_HOME (docs/backup.md)`);
    return result;
  }

  private lastProgress = 0;

  private showProgress({ phase, done, total }: BackupProgress): void {
    const text =
      done !== undefined && total ? `${phase}: ${Math.min(100, Math.floor((done / total) * 100))}%` : phase;
    if (process.stderr.isTTY) {
      process.stderr.write(`\r${text.slice(0, 100).padEnd(100)}`);
      return;
    }
    // Without a terminal (a log, a cron mail), one line every few seconds at most.
    if (Date.now() - this.lastProgress < 5000 && done !== total) return;
    this.lastProgress = Date.now();
    process.stderr.write(`${text}\n`);
  }
}
