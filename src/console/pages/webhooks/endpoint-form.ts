import type { Context } from 'koa';
import { EVENT_TYPES } from '../../../events/catalogue.js';
import { CREATE_ENDPOINT_BODY } from '../../../webhooks/schemas.js';
import { html, join } from '../../../html/html.js';
import { fieldOf, formReader, type FormWording } from '../../forms.js';
import type { ConsoleKit } from '../../kit.js';
import type { Words } from '../../messages.js';
import { CHECKED } from '../../views.js';

/*
 * The endpoint form (create on the list, edit on an endpoint's page): a URL, a description and the event
 * types as checkboxes, read with the API's body schema.
 */

/** The API's own bounds (webhooks/schemas.ts), for the inputs' `maxlength`. */
export const URL_MAX = CREATE_ENDPOINT_BODY.properties.url.maxLength;
export const DESCRIPTION_MAX = CREATE_ENDPOINT_BODY.properties.description.maxLength;
export const EVENT_CHOICES = ['*', ...EVENT_TYPES];

/**
 * Event types are checkboxes named `event:<type>` with its dots as colons: the form parser keeps one value
 * per name, and reads a dot in a name as a nested object.
 */
const EVENT_FIELD = 'event:';
const eventField = (type: string) => `${EVENT_FIELD}${type.replaceAll('.', ':')}`;
/** The event types ticked in a form, as typed (the schema bounds them, the services check the catalogue). */
export const eventsOfForm = (form: Record<string, string>): string[] =>
  Object.keys(form)
    .filter((name) => name.startsWith(EVENT_FIELD))
    .map((name) => name.slice(EVENT_FIELD.length).replaceAll(':', '.'));

const readEndpoint = formReader(CREATE_ENDPOINT_BODY);

/** An endpoint form's problem in the reader's words. */
const endpointWording =
  (t: Words): FormWording =>
  (issue) => {
    const max = { max: String(issue.limit) };
    const tooLong = issue.keyword === 'maxLength';
    switch (fieldOf(issue)) {
      case 'url':
        if (tooLong) return t('webhooks.too_long', max);
        return issue.keyword === 'required' || issue.keyword === 'minLength'
          ? t('webhooks.url_missing')
          : t('form.invalid');
      case 'enabled_events':
        return issue.keyword === 'maxItems' ? t('webhooks.too_many_events') : t('webhooks.no_events');
      case 'description':
        return tooLong ? t('webhooks.too_long', max) : t('form.invalid');
      default:
        return t('form.invalid');
    }
  };

/** The endpoint form as the API's body: URL and description trimmed, an empty description none. */
export function endpointOfForm(ctx: Context, kit: ConsoleKit) {
  const { form } = kit.state(ctx);
  const description = (form.description ?? '').trim();
  return readEndpoint(
    { url: (form.url ?? '').trim(), enabled_events: eventsOfForm(form), description: description || null },
    endpointWording(kit.words(ctx)),
  );
}

/** Checkboxes of the event types, `*` first; `checked` are ticked. */
export function eventChoices(t: Words, checked: readonly string[]) {
  const boxes = EVENT_CHOICES.map((type) => {
    const id = type === '*' ? 'event-all' : `event-${type.replace(/[^a-z_]/g, '-')}`;
    const label = type === '*' ? t('webhooks.all_events') : type;
    return html`<label class="check" for="${id}"><input type="checkbox" id="${id}" name="${eventField(type)}" value="1"${checked.includes(type) && CHECKED}> ${label}</label>`;
  });
  return html`<fieldset class="event-choices"><legend>${t('webhooks.events')}</legend>
<p class="hint">${t('webhooks.events_hint')}</p>
${join(boxes, '\n')}</fieldset>`;
}
