import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { resolveHome } from '../src/config/load-config.js';
import type { RestoreResult } from '../src/backup/restore.js';

export default class Restore extends BaseCommand {
  static override summary = 'Restore an archive of svc backup into a fresh data directory (and database)';
  static override description =
    'Every member is checked against the SHA-256 in the archive before anything is written. The database is restored (SQLite: the file; PostgreSQL: pg_restore into --database-url, or the URL of the archived config), then the master key and config.json, private to this user (0600, 0700), then the migrations this svc has beyond the archive. It refuses a home that holds an installation, a database that holds data (unless --force), and a home that svc serve is running on.';
  static override examples = [
    '<%= config.bin %> restore svc-backup-20261125T130000Z.tar.gz --home /var/lib/svc',
    '<%= config.bin %> restore backup.tar.gz --home /var/lib/svc --database-url postgres://svc@db.internal/svc',
  ];
  static override args = {
    file: Args.string({ description: 'archive written by svc backup', required: true }),
  };
  static override flags = {
    'database-url': Flags.string({
      description:
        "restore the database here instead of the archived config's URL (it is saved in config.json)",
    }),
    force: Flags.boolean({ description: 'replace an existing installation and a database that holds data' }),
  };

  async run(): Promise<RestoreResult> {
    const { args, flags } = await this.parse(Restore);
    const { restoreBackup } = await import('../src/backup/restore.js');
    const result = await restoreBackup({
      archive: args.file,
      home: resolveHome(flags.home, process.env),
      databaseUrl: flags['database-url'],
      force: flags.force,
      env: process.env,
      onProgress: ({ phase, done, total }) => {
        if (done === undefined || done === total) process.stderr.write(`${phase}\n`);
      },
    });
    const { manifest } = result;
    this.log(`Restored the backup of ${manifest.created_at} (svc ${manifest.svc_version})`);
    this.log(`  data directory  ${result.home}`);
    this.log(`  config          ${result.configFile}`);
    this.log(
      `  master key      ${result.masterKeyFile ?? 'not in the archive: set SVC_MASTER_KEY as before'}`,
    );
    this.log(`  database        ${result.database}`);
    this.log(
      `  migrations      ${result.migrationsApplied.length ? `applied ${result.migrationsApplied.join(', ')}` : `up to date (${manifest.database.schema_version ?? 'empty'})`}`,
    );
    if (result.secrets)
      this.log(`  secrets         ${result.secrets.readable} stored secret(s) open with the restored key`);
    if (result.secrets && result.secrets.unreadable.length > 0)
      process.stderr.write(
        `WARNING: ${result.secrets.unreadable.length} stored secret(s) do not open with the archived master key (${result.secrets.unreadable.slice(0, 5).join(', ')}): those links must reconnect and those endpoints roll their secret.\n`,
      );
    this.log('\nNext: svc serve');
    return result;
  }
}
