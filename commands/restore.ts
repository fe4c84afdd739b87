import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { resolveHome } from '../src/config/load-config.js';
import type { RestoreResult } from '../src/backup/restore.js';

export default class Restore extends BaseCommand {
  static override summary = 'Restore an archive of svc backup into a fresh data directory (and database)';
  static override description =
    "The archive is untrusted input: an encrypted one is authenticated in full before anything is unpacked; members are unpacked, bounded by the sizes the manifest declares and --max-size, into a staging directory inside the home and checked against their SHA-256. The database is rebuilt by svc's own migrations and only the archive's table data is loaded into it (SQLite: <home>/svc.db or --database-url; PostgreSQL: --database-url), then the master key (<home>/master.key) and config.json, with every path in it dropped and every setting that decides where secrets, bank logins or traffic go or which key opens them set aside (listed beside its archived value; --keep-config takes one by name), private to this user (0600, 0700), then the migrations this svc has beyond the archive. It refuses a home that holds an installation, a database that holds data (unless --force), and a home that svc serve is running on. Any refusal leaves nothing behind. See docs/backup.md.";
  static override examples = [
    '<%= config.bin %> restore svc-backup-20261125T130000Z.tar.gz.enc --home /var/lib/svc --passphrase-file /root/svc-backup.pass',
    '<%= config.bin %> restore backup.tar.gz --home /var/lib/svc --database-url postgres://svc@db.internal/svc',
  ];
  static override args = {
    file: Args.string({ description: 'archive written by svc backup', required: true }),
  };
  static override flags = {
    'database-url': Flags.string({
      description:
        'restore the database here (default: <home>/svc.db; a PostgreSQL archive needs it); saved in config.json',
    }),
    force: Flags.boolean({ description: 'replace an existing installation and a database that holds data' }),
    'passphrase-file': Flags.string({
      description:
        'an encrypted archive: read the passphrase from the first line of this file (else SVC_BACKUP_PASSPHRASE, else a prompt)',
    }),
    'keep-config': Flags.string({
      description:
        'take this setting of the archived config.json after all, one that decides where secrets, bank logins or traffic go or which key opens them (e.g. banks.connectors); a restore sets them aside and lists each with its archived value. Repeatable',
      multiple: true,
    }),
    'max-size': Flags.string({
      description: 'refuse an archive that unpacks to more than this (e.g. 500M, 20G; default 64G)',
    }),
  };

  async run(): Promise<RestoreResult> {
    const { args, flags } = await this.parse(Restore);
    const { restoreBackup } = await import('../src/backup/restore.js');
    const { ArchiveError } = await import('../src/errors/archive-error.js');
    const { readPassphrase } = await import('../src/backup/passphrase.js');
    const { CliError } = await import('../src/errors/cli-error.js');
    const { printable } = await import('../src/text/printable.js');
    const shownValue = (value: unknown) => {
      const text = printable(JSON.stringify(value) ?? 'not set');
      return text.length > 200 ? `${text.slice(0, 200)}…` : text;
    };
    const maxBytes = flags['max-size'] === undefined ? undefined : parseSize(flags['max-size']);
    let result: RestoreResult;
    try {
      result = await restoreBackup({
        archive: args.file,
        home: resolveHome(flags.home, process.env),
        databaseUrl: flags['database-url'],
        force: flags.force,
        env: process.env,
        maxBytes,
        keepConfig: flags['keep-config'],
        passphrase: () =>
          readPassphrase({
            file: flags['passphrase-file'],
            env: process.env,
            terminal: { input: process.stdin, output: process.stderr },
            confirm: false,
            purpose: 'restore',
          }),
        onProgress: ({ phase, done, total }) => {
          if (done === undefined || done === total) process.stderr.write(`${phase}\n`);
        },
      });
    } catch (error) {
      // An unusable archive: one line (exit 65, EX_DATAERR), whatever it was that gave it away.
      if (error instanceof ArchiveError) throw new CliError('unusable_archive', error.message, 65);
      throw error;
    }
    const { manifest } = result;
    if (!result.encrypted)
      process.stderr.write(
        'Note: this archive was not encrypted; anyone who could read it could read the master key.\n',
      );
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
    // The archive chose these keys and values: shown with every character a terminal would act on escaped.
    for (const [i, setting] of result.droppedSettings.entries()) {
      const line = `${setting.key} from the archived config.json: ${setting.reason}`;
      this.log(`  ${i === 0 ? 'not restored  ' : '              '}  ${printable(line)}`);
      if (setting.keep) {
        this.log(`                    archive   ${shownValue(setting.archived)}`);
        this.log(
          `                    restored  ${shownValue(setting.restored)} (to take the archive's: restore again with --force ${setting.keep})`,
        );
      }
    }
    for (const [i, setting] of result.keptSettings.entries())
      this.log(
        `  ${i === 0 ? 'kept          ' : '              '}  ${setting.key} from the archived config.json (--keep-config): ${shownValue(setting.value)}`,
      );
    if (result.secrets)
      this.log(`  secrets         ${result.secrets.readable} stored secret(s) open with the restored key`);
    if (result.secrets && result.secrets.unreadable.length > 0)
      process.stderr.write(
        `WARNING: ${result.secrets.unreadable.length} stored secret(s) do not open with the archived master key (${result.secrets.unreadable.slice(0, 5).join(', ')}): those links must reconnect and those endpoints roll their secret.\n`,
      );
    const ca = result.testCa;
    this.log(
      `  test CA         ${ca.source === 'archive' ? 'restored from the archive' : ca.source === 'kept' ? "this data directory's own (the archive has none)" : 'a new one (the archive has none)'}: ${ca.directory}`,
    );
    if (ca.source === 'new')
      process.stderr.write(
        `WARNING: the archive comes from an svc that did not back up test mode's CA, so a new one was made. The simulated consent banks register the appliance again when svc serve starts, but the grants they issued under the old CA cannot be opened: ${ca.relink.length === 0 ? 'no test-mode consent link is affected' : `${ca.relink.length} test-mode consent link(s) must be connected again (${ca.relink.slice(0, 5).join(', ')}${ca.relink.length > 5 ? ', …' : ''})`}.\n`,
      );
    this.log('\nNext: svc serve');
    return result;
  }
}

/** `500M`, `20G`, `1024` (bytes). */
function parseSize(text: string): number {
  const match = /^(\d+)\s*([KMGT]?)i?B?$/i.exec(text.trim());
  if (!match) throw new Error(`--max-size: "${text}" is not a size; use e.g. 500M or 20G.`);
  const power = ['', 'K', 'M', 'G', 'T'].indexOf(match[2]!.toUpperCase());
  return Number(match[1]) * 1024 ** power;
}
