import { Box, Text, render } from 'ink';
import { useEffect, useState } from 'react';
import type { ApplianceStatus } from '../../processes/status.js';
import { describeBuild } from '../../processes/build-info.js';
import { formatBytes, formatSeconds } from './format.js';

const STATUS_COLOUR: Record<string, string> = {
  running: 'green',
  starting: 'yellow',
  restarting: 'yellow',
  stopping: 'yellow',
  failed: 'red',
  stopped: 'gray',
};

function StatusView({
  initial,
  refresh,
}: {
  initial: ApplianceStatus;
  refresh: (() => Promise<ApplianceStatus>) | null;
}) {
  const [status, setStatus] = useState(initial);
  useEffect(() => {
    if (!refresh) return;
    const timer = setInterval(() => void refresh().then(setStatus), 2000);
    return () => clearInterval(timer);
  }, [refresh]);
  const { database, queues } = status;
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold>Build</Text> {describeBuild(status.build)}
      </Text>
      <Box marginTop={1} />
      <Text bold>Processes</Text>
      {status.processes.length === 0 ? (
        <Text color="gray"> none running from {status.home} (start them with `svc serve`)</Text>
      ) : (
        <Box flexDirection="column">
          <Text color="gray">
            {'  ' +
              ['ROLE', 'PID', 'STATUS', 'UPTIME', 'RESTARTS', 'LAST EXIT']
                .map((h, i) => h.padEnd([12, 8, 12, 10, 10, 20][i]!))
                .join('')}
          </Text>
          {status.processes.map((p) => (
            <Text key={`${p.supervisor_pid}-${p.role}`}>
              {'  ' + p.role.padEnd(12) + String(p.pid ?? '-').padEnd(8)}
              <Text color={STATUS_COLOUR[p.status] ?? 'white'}>{p.status.padEnd(12)}</Text>
              {formatSeconds(p.uptime_seconds).padEnd(10) +
                String(p.restarts).padEnd(10) +
                (p.last_exit ?? '-')}
            </Text>
          ))}
        </Box>
      )}
      {status.servers.length > 0 ? (
        <Box marginTop={1} flexDirection="column">
          <Text bold>Servers (from the database: every host)</Text>
          {status.servers.map((server) => (
            <Text key={`${server.host}-${server.pid}`}>
              {'  '}
              {server.host} pid {server.pid}: svc {server.version}
              {server.same_build ? null : <Text color="yellow"> (not this build)</Text>}, roles {server.roles}
              , since {server.started_at}
            </Text>
          ))}
        </Box>
      ) : null}
      <Box marginTop={1} flexDirection="column">
        <Text bold>Database</Text>
        <Text> {database.location}</Text>
        {database.reachable ? (
          <Text>
            {'  '}schema {database.schema_version ?? '(empty)'}
            {database.schema_state === 'behind' ? (
              <Text color="yellow">
                {' '}
                {database.schema_fits_build
                  ? `(behind this build by ${database.pending_migrations} contract migration${database.pending_migrations === 1 ? '' : 's'}, which this build runs without: svc migrate once no node of the previous build is left)`
                  : `(behind this build: ${database.pending_migrations} pending; run svc migrate)`}
              </Text>
            ) : null}
            {database.schema_state === 'ahead' ? (
              <Text color={database.schema_fits_build ? 'yellow' : 'red'}>
                {' '}
                (ahead of this build: it has {database.unknown_migrations.join(', ')};{' '}
                {database.schema_fits_build
                  ? 'expand migrations this build runs on: an upgrade is under way, finish it'
                  : 'upgrade svc'}
                )
              </Text>
            ) : null}
            , size {formatBytes(database.size_bytes)}
          </Text>
        ) : (
          <Text color="red"> unreachable: {database.error}</Text>
        )}
      </Box>
      {queues ? (
        <Box marginTop={1} flexDirection="column">
          <Text bold>Queues</Text>
          <Text>
            {' '}
            sync jobs queued {queues.sync_jobs_queued}, running {queues.sync_jobs_running}
          </Text>
          <Text> webhook deliveries pending {queues.webhook_deliveries_pending}</Text>
          <Text>
            {' '}
            grant revocations pending {queues.grant_revocations_pending}, failed{' '}
            <Text color={queues.grant_revocations_failed > 0 ? 'yellow' : undefined}>
              {queues.grant_revocations_failed}
            </Text>
          </Text>
        </Box>
      ) : null}
      {status.banks && status.banks.length > 0 ? (
        <Box marginTop={1} flexDirection="column">
          <Text bold>Consent banks (effective sync interval)</Text>
          {status.banks.map((b) => (
            <Text key={`${b.bank}-${b.mode}`}>
              {'  '}
              {b.bank} ({b.mode}): {b.links} links × {b.calls_per_sync} calls a sync, every link synced every{' '}
              <Text color={b.stretched ? 'yellow' : undefined}>{b.effective_interval_minutes} minutes</Text>
              {b.stretched
                ? ` (stretched from ${b.configured_interval_minutes}: the bank's budget is short)`
                : null}
            </Text>
          ))}
        </Box>
      ) : null}
    </Box>
  );
}

/** Renders once, or until Ctrl-C with `refresh`. */
export async function renderStatus(
  status: ApplianceStatus,
  refresh: (() => Promise<ApplianceStatus>) | null,
): Promise<void> {
  const app = render(<StatusView initial={status} refresh={refresh} />);
  if (!refresh) app.unmount();
  await app.waitUntilExit();
}
