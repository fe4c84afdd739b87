import { Box, Text, render } from 'ink';
import type { DeletedLinkInspection, LinkInspection } from '../../links/inspect.js';

function money(amount: number | null, currency: string): string {
  if (amount === null) return '-';
  return currency === 'CLP'
    ? `$${amount.toLocaleString('es-CL')}`
    : `${(amount / 100).toFixed(2)} ${currency}`;
}

function Section({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <Box flexDirection="column" marginTop={1}>
      <Text bold>{title}</Text>
      {children}
    </Box>
  );
}

function LinkView({ data }: { data: LinkInspection }) {
  const { link } = data;
  const statusColour = link.status === 'active' ? (link.paused ? 'yellow' : 'green') : 'red';
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold>{link.id}</Text> {link.bank_id} {link.holder_type}{' '}
        <Text color={statusColour}>
          {link.status}
          {link.paused ? ' (paused)' : ''}
        </Text>{' '}
        {link.mode} mode, org {link.org_id}
      </Text>
      <Text>
        {' '}
        holder {link.holder_name ?? '-'}, external user {link.external_user_id ?? '-'}, created{' '}
        {link.created_at}
      </Text>
      <Text>
        {' '}
        last synced {link.last_synced_at ?? 'never'}, next sync {link.next_sync_at ?? '-'}, refresh{' '}
        {link.refresh_status}
      </Text>
      <Text>
        {' '}
        syncs {link.sync_successes}/{link.sync_attempts} succeeded, credential failures in a row{' '}
        {link.consecutive_failures}, last error {link.last_error_code ?? '-'}
      </Text>
      {link.consent ? (
        <Section title="Consent">
          <Text>
            {'  '}
            <Text color={link.consent.status === 'active' ? 'green' : 'yellow'}>{link.consent.status}</Text>,
            expires {link.consent.expires_at ?? 'never (until revoked)'}, covers{' '}
            {link.consent.covers.join(', ') || '-'}
          </Text>
        </Section>
      ) : null}
      <Section title="Diagnosis">
        {data.diagnosis.map((note, i) => (
          <Text key={i} color={link.status === 'active' && !link.last_error_code ? 'green' : 'yellow'}>
            {' '}
            • {note}
          </Text>
        ))}
      </Section>
      <Section title={`Accounts (${data.accounts.length})`}>
        {data.accounts.map((a) => (
          <Text key={a.id}>
            {'  '}
            {a.id} {a.name} ·{a.last_4 ?? '????'} {a.type} {a.currency}{' '}
            <Text color={a.status === 'removed' ? 'red' : 'green'}>{a.status}</Text> current{' '}
            {money(a.balance.current, a.currency)} available {money(a.balance.available, a.currency)}
            {a.balance.limit !== null ? ` limit ${money(a.balance.limit, a.currency)}` : ''}, {a.movements}{' '}
            movements, {a.pending} pending
          </Text>
        ))}
      </Section>
      <Section title="Sync jobs">
        {data.jobs.length === 0 ? <Text color="gray"> none</Text> : null}
        {data.jobs.map((j) => (
          <Text key={j.id}>
            {' '}
            {j.id} {j.refresh_type} {j.status} attempts {j.attempts} run at {j.run_at}
            {j.last_error ? ` error ${j.last_error}` : ''}
          </Text>
        ))}
      </Section>
      <Section title="Refresh intents">
        {data.refresh_intents.length === 0 ? <Text color="gray"> none</Text> : null}
        {data.refresh_intents.map((i) => (
          <Text key={i.id}>
            {' '}
            {i.id} {i.refresh_type} {i.status}
            {i.error_code ? ` (${i.error_code})` : ''} created {i.created_at}
          </Text>
        ))}
      </Section>
      <Section title="Recent events">
        {data.events.map((e) => (
          <Text key={e.id}>
            {' '}
            {e.created_at} {e.type} {e.id}
          </Text>
        ))}
      </Section>
      <Section title="Recent webhook deliveries">
        {data.deliveries.length === 0 ? <Text color="gray"> none</Text> : null}
        {data.deliveries.map((d) => (
          <Text key={d.id}>
            {'  '}
            {d.id} {d.event_type} → {d.endpoint_id}{' '}
            <Text color={d.status === 'failed' ? 'red' : d.status === 'succeeded' ? 'green' : 'yellow'}>
              {d.status}
            </Text>{' '}
            attempts {d.attempts}
            {d.last_response_status ? ` last HTTP ${d.last_response_status}` : ''}
            {d.last_error ? ` ${d.last_error}` : ''}
          </Text>
        ))}
      </Section>
    </Box>
  );
}

const REVOCATION_COLOUR = { revoked: 'green', pending: 'yellow', failed: 'red' } as const;

/** A deleted link: what it was, who deleted it, and for a consent link whether the bank was told. */
function DeletedLinkView({ data }: { data: DeletedLinkInspection }) {
  const revocation = data.grant_revocation;
  const last = data.last_state;
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold>{data.id}</Text> {data.bank_id} <Text color="red">deleted</Text> at {data.deleted_at}{' '}
        {data.mode} mode, org {data.org_id}
        {data.deleted_by ? ` by ${data.deleted_by}` : ''}
      </Text>
      {last ? (
        <Section title="Last state">
          <Text>
            {' '}
            {last.status}
            {last.paused ? ', paused' : ''}, {last.holder_type} holder, {last.accounts_count} accounts, last
            synced {last.last_synced_at ?? 'never'}
            {last.last_error_code ? `, last error ${last.last_error_code}` : ''}
          </Text>
          <Text>
            {' '}
            external user {last.external_user_id ?? '-'}, created {last.created_at}
          </Text>
        </Section>
      ) : null}
      {revocation ? <RevocationSection revocation={revocation} /> : null}
      <Section title="Diagnosis">
        {data.diagnosis.map((note, i) => (
          <Text key={i} color={revocation ? REVOCATION_COLOUR[revocation.status] : undefined}>
            {' '}
            • {note}
          </Text>
        ))}
      </Section>
    </Box>
  );
}

function RevocationSection({
  revocation,
}: {
  revocation: NonNullable<DeletedLinkInspection['grant_revocation']>;
}) {
  return (
    <Box flexDirection="column">
      <Section title="Grant revocation at the bank">
        <Text>
          {' '}
          status <Text color={REVOCATION_COLOUR[revocation.status]}>{revocation.status}</Text>, attempts{' '}
          {revocation.attempts} of {revocation.max_attempts}, queued {revocation.created_at}
        </Text>
        {revocation.status === 'pending' ? <Text> next attempt {revocation.next_attempt_at}</Text> : null}
        {revocation.revoked_at ? <Text> revoked {revocation.revoked_at}</Text> : null}
        {revocation.last_error ? <Text> last error {revocation.last_error}</Text> : null}
      </Section>
    </Box>
  );
}

export async function renderLinkInspection(data: LinkInspection | DeletedLinkInspection): Promise<void> {
  const app = render('deleted' in data ? <DeletedLinkView data={data} /> : <LinkView data={data} />);
  app.unmount();
  await app.waitUntilExit();
}
