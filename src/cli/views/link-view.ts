import type { DeletedLinkInspection, LinkInspection } from '../../inspect/inspect.js';
import { wrapText } from './wrap.js';

/*
 * `svc links inspect` for a person: plain lines laid out to the terminal's width (outputWidth, as `svc doctor`
 * does), each item's continuation lines indented under it. The ink view it replaces let the terminal wrap
 * lines of up to ~190 characters at column 0, so an 80-column terminal lost the shape of every section.
 * The caller has made every string printable (printableFields).
 */

function money(amount: number | null, currency: string): string {
  if (amount === null) return '-';
  return currency === 'CLP'
    ? `$${amount.toLocaleString('es-CL')}`
    : `${(amount / 100).toFixed(2)} ${currency}`;
}

/** One item: `text` wrapped to `width`, its first line at `indent` and the rest two columns further in. */
function item(text: string, width: number, indent = 2): string[] {
  const hang = indent + 2;
  const lines = wrapText(text, Math.max(20, width - hang));
  return lines.map((line, i) => `${' '.repeat(i === 0 ? indent : hang)}${line}`.trimEnd());
}

function section(title: string, body: string[]): string[] {
  return ['', title, ...body];
}

function none(list: readonly unknown[], width: number): string[] {
  return list.length === 0 ? item('none', width) : [];
}

export function formatLinkInspection(data: LinkInspection, width: number): string[] {
  const { link } = data;
  const status = `${link.status}${link.paused ? ' (paused)' : ''}`;
  const lines = [
    ...item(
      `${link.id} ${link.bank_id} ${link.holder_type} ${status} ${link.mode} mode, org ${link.org_id}`,
      width,
      0,
    ),
    ...item(
      `holder ${link.holder_name ?? '-'}, external user ${link.external_user_id ?? '-'}, created ${link.created_at}`,
      width,
    ),
    ...item(
      `last synced ${link.last_synced_at ?? 'never'}, next sync ${link.next_sync_at ?? '-'}, refresh ${link.refresh_status}`,
      width,
    ),
    ...item(
      `syncs ${link.sync_successes}/${link.sync_attempts} succeeded, credential failures in a row ${link.consecutive_failures}, last error ${link.last_error_code ?? '-'}`,
      width,
    ),
  ];
  if (link.consent)
    lines.push(
      ...section(
        'Consent',
        item(
          `${link.consent.status}, expires ${link.consent.expires_at ?? 'never (until revoked)'}, covers ${link.consent.covers.join(', ') || '-'}`,
          width,
        ),
      ),
    );
  lines.push(
    ...section(
      'Diagnosis',
      data.diagnosis.flatMap((note) => item(`• ${note}`, width)),
    ),
    ...section(
      `Accounts (${data.accounts.length})`,
      data.accounts.flatMap((a) =>
        item(
          `${a.id} ${a.name} ·${a.last_4 ?? '????'} ${a.type} ${a.currency} ${a.status} current ${money(a.balance.current, a.currency)} available ${money(a.balance.available, a.currency)}${a.balance.limit !== null ? ` limit ${money(a.balance.limit, a.currency)}` : ''}, ${a.movements} movements, ${a.pending} pending`,
          width,
        ),
      ),
    ),
    ...section('Sync jobs', [
      ...none(data.jobs, width),
      ...data.jobs.flatMap((j) =>
        item(
          `${j.id} ${j.refresh_type} ${j.status} attempts ${j.attempts} run at ${j.run_at}${j.last_error ? ` error ${j.last_error}` : ''}`,
          width,
        ),
      ),
    ]),
    ...section('Refresh intents', [
      ...none(data.refresh_intents, width),
      ...data.refresh_intents.flatMap((i) =>
        item(
          `${i.id} ${i.refresh_type} ${i.status}${i.error_code ? ` (${i.error_code})` : ''} created ${i.created_at}`,
          width,
        ),
      ),
    ]),
    ...section('Recent events', [
      ...none(data.events, width),
      ...data.events.flatMap((e) => item(`${e.created_at} ${e.type} ${e.id}`, width)),
    ]),
    ...section('Recent webhook deliveries', [
      ...none(data.deliveries, width),
      ...data.deliveries.flatMap((d) =>
        item(
          `${d.id} ${d.event_type} → ${d.endpoint_id} ${d.status} attempts ${d.attempts}${d.last_response_status ? ` last HTTP ${d.last_response_status}` : ''}${d.last_error ? ` ${d.last_error}` : ''}`,
          width,
        ),
      ),
    ]),
  );
  return lines;
}

/** A deleted link: what it was, who deleted it, and for a consent link whether the bank was told. */
export function formatDeletedLinkInspection(data: DeletedLinkInspection, width: number): string[] {
  const revocation = data.grant_revocation;
  const last = data.last_state;
  return [
    ...item(
      `${data.id} ${data.bank_id} deleted at ${data.deleted_at} ${data.mode} mode, org ${data.org_id}${data.deleted_by ? ` by ${data.deleted_by}` : ''}`,
      width,
      0,
    ),
    ...(last
      ? section('Last state', [
          ...item(
            `${last.status}${last.paused ? ', paused' : ''}, ${last.holder_type} holder, ${last.accounts_count} accounts, last synced ${last.last_synced_at ?? 'never'}${last.last_error_code ? `, last error ${last.last_error_code}` : ''}`,
            width,
          ),
          ...item(`external user ${last.external_user_id ?? '-'}, created ${last.created_at}`, width),
        ])
      : []),
    ...(revocation
      ? section('Grant revocation at the bank', [
          ...item(
            `status ${revocation.status}, attempts ${revocation.attempts} of ${revocation.max_attempts}, queued ${revocation.created_at}`,
            width,
          ),
          ...(revocation.status === 'pending'
            ? item(`next attempt ${revocation.next_attempt_at}`, width)
            : []),
          ...(revocation.revoked_at ? item(`revoked ${revocation.revoked_at}`, width) : []),
          ...(revocation.last_error ? item(`last error ${revocation.last_error}`, width) : []),
        ])
      : []),
    ...section(
      'Diagnosis',
      data.diagnosis.flatMap((note) => item(`• ${note}`, width)),
    ),
  ];
}

export function formatAnyLinkInspection(
  data: LinkInspection | DeletedLinkInspection,
  width: number,
): string[] {
  return 'deleted' in data ? formatDeletedLinkInspection(data, width) : formatLinkInspection(data, width);
}
