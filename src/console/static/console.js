/* global document, navigator */
// The console's only script, and an optional one: every page works without it. It adds a copy button to a
// secret shown once, and to each id in a table, which it shows shortened (`link_…75a2`).
'use strict';

/** An id of ours: a prefix and at least 12 hex digits (`link_dda9c6994f5c75a2`, `evt_…`, `wd_…`). */
const ID = /^([a-z]+_)([0-9a-f]{8,})([0-9a-f]{4})$/;

document.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-copy], button[data-copy-text]');
  if (!button || !navigator.clipboard) return;
  const source = button.dataset.copy ? document.getElementById(button.dataset.copy) : null;
  const text = source ? source.textContent : button.dataset.copyText;
  if (!text) return;
  navigator.clipboard.writeText(text).then(() => {
    if (button.dataset.copied) button.textContent = button.dataset.copied;
    button.classList.add('copied');
  });
});
for (const button of document.querySelectorAll('button[data-copy]')) button.hidden = false;

// An id in a table keeps its whole text (what a screen reader says, what a search or a selection finds);
// the stylesheet folds its middle into "…" (`.id-middle`), and a button beside it copies it whole.
const words = document.body.dataset;
for (const code of document.querySelectorAll('td code')) {
  const match = ID.exec(code.textContent.trim());
  if (!match || code.classList.contains('id')) continue;
  code.classList.add('id');
  code.title = match[0];
  code.textContent = '';
  for (const [part, className] of [
    [match[1], 'id-prefix'],
    [match[2], 'id-middle'],
    [match[3], 'id-tail'],
  ]) {
    const span = document.createElement('span');
    span.className = className;
    span.textContent = part;
    code.append(span);
  }
  const copy = document.createElement('button');
  copy.type = 'button';
  copy.className = 'copy-id';
  copy.dataset.copyText = match[0];
  copy.setAttribute('aria-label', `${words.copy || 'Copy'} ${match[0]}`);
  copy.title = words.copy || 'Copy';
  (code.closest('a') || code).after(copy);
}
