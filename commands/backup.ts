import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { buildLabel } from '../src/processes/build-info.js';
import type { BackupProgress, BackupResult } from '../src/backup/backup.js';

export const BACKUP_WARNING =
  'WARNING: this archive holds the master key. Anyone who has it can read every stored bank credential and webhook signing secret: store it like the key itself (encrypted, offline, few readers). It is created with mode 0600.';

export const ENCRYPTED_NOTE =
  'This archive holds the master key, encrypted with your passphrase (scrypt, AES-256-GCM). Without the passphrase it cannot be restored: keep the passphrase apart from the archive, as safely as the key. It is created with mode 0600.';

export const ENVIRONMENT_KEY_NOTE =
  'The master key comes from SVC_MASTER_KEY and is NOT in this archive: without it the restored secrets cannot be read, so keep it apart, as safely. The archive is created with mode 0600: it holds the sealed secrets and config.json.';

export default class Backup extends BaseCommand {
  static override summary =
    'Write one archive with a consistent copy of the database, config.json and the master key, while svc serve runs';
  static override description =
    'SQLite is copied with VACUUM INTO (one read transaction beside the running writers); PostgreSQL with pg_dump --format=custom (install postgresql-client). The archive is a .tar.gz with a manifest.json holding the svc version, the engine, the migration level and the SHA-256 of every member, encrypted by default with a passphrase (scrypt, AES-256-GCM) from --passphrase-file, SVC_BACKUP_PASSPHRASE or a prompt. It goes to <home>/backups (0700) unless --out says otherwise. See docs/backup.md.';
  static override examples = [
    '<%= config.bin %> backup --passphrase-file /root/svc-backup.pass',
    '<%= config.bin %> backup --out /var/backups/svc/svc-$(date +%F).tar.gz.enc',
    '<%= config.bin %> backup --no-encrypt --out /var/backups/svc/plain.tar.gz',
    '<%= config.bin %> backup --json',
  ];
  static override flags = {
    out: Flags.string({
      description:
        'archive to write; it must not exist (default: <home>/backups/svc-backup-<UTC time>.tar.gz.enc)',
    }),
    encrypt: Flags.boolean({
      default: true,
      allowNo: true,
      description:
        'encrypt the archive with a passphrase (--no-encrypt: a plain .tar.gz holding the master key)',
    }),
    'passphrase-file': Flags.string({
      description:
        'read the passphrase from the first line of this file (else SVC_BACKUP_PASSPHRASE, else a prompt)',
    }),
  };

  async run(): Promise<BackupResult> {
    const { flags } = await this.parse(Backup);
    const config = this.appConfig(flags.home);
    const { createBackup, defaultArchiveName, defaultBackupDirectory } =
      await import('../src/backup/backup.js');
    const { readPassphrase } = await import('../src/backup/passphrase.js');
    const clock = this.clock(config);
    const now = () => new Date(clock.now());
    // Asked before anything is copied: a refusal here leaves nothing behind.
    const passphrase = flags.encrypt
      ? await readPassphrase({
          file: flags['passphrase-file'],
          env: process.env,
          terminal: { input: process.stdin, output: process.stderr },
          confirm: true,
          purpose: 'backup',
        })
      : null;
    const out =
      flags.out ?? join(defaultBackupDirectory(config.home), defaultArchiveName(now(), passphrase !== null));
    // Straight to stderr: oclif mutes logToStderr under --json, and this warning must never be muted.
    process.stderr.write(
      `${config.masterKey !== '' ? ENVIRONMENT_KEY_NOTE : passphrase !== null ? ENCRYPTED_NOTE : BACKUP_WARNING}\n`,
    );
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
      passphrase,
      svcVersion: buildLabel(),
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
    this.log(
      `Wrote ${result.file} (${formatBytes(result.bytes)}, mode 0600, ${result.encrypted ? 'encrypted' : 'NOT encrypted'})`,
    );
    this.log(
      `  database    ${manifest.source.database}, schema ${manifest.database.schema_version ?? '(empty)'}`,
    );
    for (const member of manifest.members)
      this.log(
        `  ${member.name.padEnd(14)}${formatBytes(member.size).padStart(11)}  sha256 ${member.sha256}`,
      );
    this.logToStderr(
      `Restore with: svc restore ${result.file} --home NEW_HOME${result.encrypted ? ' (it asks for the passphrase, or takes --passphrase-file)' : ''} (docs/backup.md)`,
    );
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
