import { BaseCommand } from '../src/cli/base-command.js';
import { ConfigError, resolveHome } from '../src/config/load-config.js';
import type { DoctorReport } from '../src/doctor/doctor.js';

export default class Doctor extends BaseCommand {
  static override summary = 'Check the installation and say how to fix each problem found';
  static override description =
    'Checks Node.js, the configuration, the data directory and its modes, the master key (and that it opens a stored secret), the database and its migrations, the API and metrics ports, the clock against the database server, free disk space, the live-mode bank connectors and the test CA of the simulated consent bank. Changes nothing and creates nothing; it contacts only what the configuration names. Exits 1 when a check fails, 0 otherwise (warnings included).';
  static override examples = ['<%= config.bin %> doctor', '<%= config.bin %> doctor --json'];

  async run(): Promise<DoctorReport> {
    const { flags } = await this.parse(Doctor);
    const { runDoctor, configFailureReport } = await import('../src/doctor/doctor.js');
    let report: DoctorReport;
    try {
      report = await runDoctor(this.appConfig(flags.home, undefined, { installed: false }));
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      report = configFailureReport(resolveHome(flags.home, process.env), error.message);
    }
    report = {
      ...report,
      checks: report.checks.map((c) => ({
        ...c,
        detail: this.masked(c.detail),
        fix: c.fix === null ? null : this.masked(c.fix),
      })),
    };
    if (!this.jsonEnabled()) {
      const { formatDoctorChecks } = await import('../src/cli/views/doctor-view.js');
      const { outputWidth } = await import('../src/cli/views/wrap.js');
      for (const line of formatDoctorChecks(report.checks, outputWidth())) this.log(line);
      const count = (status: string) => report.checks.filter((c) => c.status === status).length;
      this.log(`\n${count('ok')} ok, ${count('warn')} warning(s), ${count('fail')} failed.`);
    }
    // Exit 1 on a failure, with the report still printed (by oclif, under --json) as on success.
    if (!report.ok) process.exitCode = 1;
    return report;
  }
}
