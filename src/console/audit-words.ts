import { html, type Html } from '../html/html.js';
import type { Locale } from '../html/locale.js';
import { atMinute } from './views.js';

/*
 * The audit log as a person reads it: each action as a sentence ("Revocó una clave de API"), who did it by
 * name, and the details as labelled lines rather than the JSON the table stores. The action's code stays
 * in the markup (`data-action`, and the filter's values) for whoever searches by it. Pure: entries in,
 * words and markup out.
 */

type Sentences = Readonly<Record<Locale, string>>;

/**
 * Every action the appliance writes to audit_log: the `action: '…'` literals under src/, the revocation
 * outcomes (links/consent/revocations.ts) and the console's own (`auditOwnAction`); test/unit/
 * console-audit-words reads src/ and fails on one missing here.
 */
export const AUDIT_ACTIONS: Readonly<Record<string, Sentences>> = {
  'organisation.created': { es: 'Creó la organización', en: 'Created the organisation' },
  'organisation.rate_limit_ceilings_changed': {
    es: 'Cambió los topes de límites de la organización',
    en: "Changed the organisation's rate limit ceilings",
  },
  'api_key.created': { es: 'Creó una clave de API', en: 'Created an API key' },
  'api_key.rotated': { es: 'Rotó una clave de API', en: 'Rotated an API key' },
  'api_key.revoked': { es: 'Revocó una clave de API', en: 'Revoked an API key' },
  'api_key.rate_limits_changed': {
    es: 'Cambió los límites de una clave de API',
    en: "Changed an API key's rate limits",
  },
  'organisation.key_cap_changed': {
    es: 'Cambió el máximo de claves de producción de la organización',
    en: "Changed the organisation's cap on live keys",
  },
  'link.create': { es: 'Creó una conexión', en: 'Created a link' },
  'link.discard': { es: 'Descartó una conexión sin terminar', en: 'Discarded an unfinished link' },
  'link.consent_granted': { es: 'El titular dio su consentimiento', en: 'The holder gave consent' },
  'link.consent_revocation_queued': {
    es: 'Pidió revocar un consentimiento en el banco',
    en: 'Asked the bank to revoke a consent',
  },
  'link.consent_revoked': { es: 'El banco revocó un consentimiento', en: 'The bank revoked a consent' },
  'link.consent_revocation_failed': {
    es: 'No se pudo revocar un consentimiento en el banco',
    en: 'Could not revoke a consent at the bank',
  },
  'link.pause': { es: 'Pausó una conexión', en: 'Paused a link' },
  'link.resume': { es: 'Reanudó una conexión', en: 'Resumed a link' },
  'link.refresh': { es: 'Pidió actualizar una conexión', en: 'Asked a link to refresh' },
  'link.delete': { es: 'Eliminó una conexión', en: 'Deleted a link' },
  'webhook_endpoint.create': { es: 'Creó un endpoint de webhooks', en: 'Created a webhook endpoint' },
  'webhook_endpoint.update': { es: 'Modificó un endpoint de webhooks', en: 'Changed a webhook endpoint' },
  'webhook_endpoint.enable': { es: 'Activó un endpoint de webhooks', en: 'Enabled a webhook endpoint' },
  'webhook_endpoint.disable': { es: 'Desactivó un endpoint de webhooks', en: 'Disabled a webhook endpoint' },
  'webhook_endpoint.roll_secret': {
    es: 'Cambió el secreto de un endpoint de webhooks',
    en: "Rolled a webhook endpoint's secret",
  },
  'webhook_endpoint.delete': { es: 'Eliminó un endpoint de webhooks', en: 'Deleted a webhook endpoint' },
  'webhook_delivery.redeliver': {
    es: 'Reenvió una entrega de webhooks',
    en: 'Redelivered a webhook delivery',
  },
  'sandbox.fire': { es: 'Disparó un evento de prueba', en: 'Fired a test event' },
  'master_key.created': { es: 'Creó una llave maestra', en: 'Created a master key' },
  'master_key.rotated': { es: 'Rotó la llave maestra', en: 'Rotated the master key' },
  'master_key.retired': { es: 'Retiró una llave maestra', en: 'Retired a master key' },
  'console_user.invited': { es: 'Invitó a un usuario de la consola', en: 'Invited a console user' },
  'console_user.invitation_accepted': { es: 'Aceptó su invitación', en: 'Accepted their invitation' },
  'console_user.reset': {
    es: 'Envió un enlace para cambiar la contraseña',
    en: 'Sent a link to set a new password',
  },
  'console_user.password_reset': { es: 'Cambió su contraseña', en: 'Set a new password' },
  'console_user.disabled': { es: 'Desactivó a un usuario de la consola', en: 'Disabled a console user' },
  'console.signed_in': { es: 'Inició sesión en la consola', en: 'Signed in to the console' },
  'console.signed_out': { es: 'Cerró sesión en la consola', en: 'Signed out of the console' },
  'console.sign_in_failed': { es: 'Falló un inicio de sesión', en: 'Failed to sign in' },
  'console.totp_enabled': { es: 'Activó el segundo factor', en: 'Turned on the second factor' },
  'console.totp_disabled': { es: 'Desactivó el segundo factor', en: 'Turned off the second factor' },
};

/** An action as a sentence; an action this build does not know (a newer build's) as its code. */
export function auditSentence(locale: Locale, action: string): string {
  return Object.hasOwn(AUDIT_ACTIONS, action) ? AUDIT_ACTIONS[action]![locale] : action;
}

const DETAIL_LABELS: Readonly<Record<string, Sentences>> = {
  mode: { es: 'Modo', en: 'Mode' },
  type: { es: 'Tipo', en: 'Type' },
  url: { es: 'URL', en: 'URL' },
  enabled_events: { es: 'Eventos', en: 'Events' },
  events: { es: 'Eventos', en: 'Events' },
  changed: { es: 'Cambió', en: 'Changed' },
  link_id: { es: 'Conexión', en: 'Link' },
  endpoint_id: { es: 'Endpoint', en: 'Endpoint' },
  event_id: { es: 'Evento', en: 'Event' },
  new_delivery: { es: 'Nueva entrega', en: 'New delivery' },
  successor: { es: 'Clave nueva', en: 'New key' },
  grace_seconds: { es: 'Segundos de gracia', en: 'Grace seconds' },
  expires_at: { es: 'Vence', en: 'Expires' },
  rate_limits: { es: 'Límites', en: 'Rate limits' },
  rate_limit_ceilings: { es: 'Topes', en: 'Ceilings' },
  email: { es: 'Correo', en: 'Email' },
  role: { es: 'Rol', en: 'Role' },
  reason: { es: 'Motivo', en: 'Reason' },
  purpose: { es: 'Para', en: 'For' },
  temporary: { es: 'Temporal', en: 'Temporary' },
  remove_totp: { es: 'Quita el segundo factor', en: 'Removes the second factor' },
  via: { es: 'Desde', en: 'Via' },
  login: { es: 'Acceso', en: 'Login' },
  bank_id: { es: 'Banco', en: 'Bank' },
  holder_type: { es: 'Titular', en: 'Holder' },
  widget_token: { es: 'Token del widget', en: 'Widget token' },
  issued_by: { es: 'Emitido por', en: 'Issued by' },
  client_id: { es: 'Cliente en el banco', en: 'Client at the bank' },
  renewal: { es: 'Renovación', en: 'Renewal' },
  revocation: { es: 'Revocación', en: 'Revocation' },
  attempts: { es: 'Intentos', en: 'Attempts' },
  last_error: { es: 'Último error', en: 'Last error' },
  max_live_keys: { es: 'Máximo de claves de producción', en: 'Most live keys' },
  set_by_operator: { es: 'Fijado por el operador', en: 'Set by the operator' },
};

const VALUE_WORDS: Readonly<Record<string, Sentences>> = {
  test: { es: 'prueba', en: 'test' },
  live: { es: 'producción', en: 'live' },
  secret: { es: 'secreta', en: 'secret' },
  publishable: { es: 'publicable', en: 'publishable' },
  operator: { es: 'operador', en: 'operator' },
  admin: { es: 'administrador', en: 'admin' },
  support: { es: 'soporte', en: 'support' },
  api: { es: 'API', en: 'API' },
  widget: { es: 'widget', en: 'widget' },
  credentials: { es: 'clave del banco', en: 'bank password' },
  consent: { es: 'consentimiento', en: 'consent' },
  individual: { es: 'persona', en: 'individual' },
  business: { es: 'empresa', en: 'business' },
  true: { es: 'sí', en: 'yes' },
  false: { es: 'no', en: 'no' },
};

function valueText(locale: Locale, value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.map((item) => valueText(locale, item)).join(', ');
  if (typeof value === 'object')
    return Object.entries(value as Record<string, unknown>)
      .map(([key, inner]) => `${key}: ${valueText(locale, inner)}`)
      .join('; ');
  const text = String(value);
  return Object.hasOwn(VALUE_WORDS, text) ? VALUE_WORDS[text]![locale] : text;
}

/** An entry's details as label/value lines, in the stored order; nulls (nothing set) left out. */
export function auditDetailLines(
  locale: Locale,
  details: Record<string, unknown> | null | undefined,
): [label: string, value: string][] {
  return Object.entries(details ?? {})
    .filter(([, value]) => value !== null && value !== undefined)
    .map(([key, value]) => [
      Object.hasOwn(DETAIL_LABELS, key) ? DETAIL_LABELS[key]![locale] : key,
      // A time in the details (`expires_at`) as every time on the page: the operator's zone, the locale's format.
      /_at$/.test(key) && typeof value === 'string' && atMinute(value)
        ? atMinute(value)
        : valueText(locale, value),
    ]);
}

/** Whether a detail's value is shown in the console's words (a mode, a role, a time), not as stored data. */
const isWorded = (key: string, value: unknown): boolean =>
  /_at$/.test(key) ||
  typeof value === 'boolean' ||
  (typeof value === 'string' && Object.hasOwn(VALUE_WORDS, value));

/**
 * The details as a term list (each value beside its label), or '-' when there are none. A value that is
 * data (an id, a URL, an event type) is marked `translate="no"`: no browser should translate it, and the
 * Spanish-page check knows it is not an untranslated word.
 */
export function auditDetailsHtml(
  locale: Locale,
  details: Record<string, unknown> | null | undefined,
): Html | string {
  const lines = auditDetailLines(locale, details);
  if (lines.length === 0) return '-';
  const worded = Object.entries(details ?? {})
    .filter(([, value]) => value !== null && value !== undefined)
    .map(([key, value]) => isWorded(key, value));
  return html`<dl class="audit-details">${lines.map(
    ([label, value], i) =>
      html`<dt>${label}</dt>${worded[i] ? html`<dd>${value}</dd>` : html`<dd translate="no">${value}</dd>`}`,
  )}</dl>`;
}

/**
 * Who did it, in words: a console user by their email (`emails`, by user id), a key by its id, the CLI by
 * the system user that ran it; anything else (a process) as written.
 */
export function auditActorText(locale: Locale, actor: string, emails: ReadonlyMap<string, string>): string {
  const [kind, ...rest] = actor.split(':');
  const who = rest.join(':');
  if (rest.length === 0) return actor;
  if (kind === 'console') return emails.get(who) ?? who;
  if (kind === 'key') return locale === 'es' ? `Clave ${who}` : `Key ${who}`;
  if (kind === 'cli') return locale === 'es' ? `Terminal (${who})` : `Command line (${who})`;
  return actor;
}
