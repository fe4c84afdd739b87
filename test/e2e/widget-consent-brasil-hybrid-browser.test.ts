import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { requireChromium } from '../helpers/browser.js';
import { BRASIL } from '../helpers/consent-countries.js';
import { DESKTOP, widgetPages } from '../helpers/widget-browser.js';

/*
 * A Brazilian bank that offers `code id_token` only (no JARM, FAPI 1.0 Advanced §5.2.2.1), linked through the
 * hosted widget in Debian's Chromium: the bank's form_post page posts the code and the ID token back to the
 * widget's callback (OAuth 2.0 Form Post Response Mode), which checks the detached signature and goes on to
 * the first sync. The trip's steps are those of the JARM bank (test/helpers/widget-browser.ts). Screenshots
 * land in test-output/screenshots/consent-br-hybrid/.
 */

const SHOTS = join(process.cwd(), 'test-output', 'screenshots', 'consent-br-hybrid');

if (requireChromium(t)) {
  t.test(
    'FAPI 1.0 Advanced §5.2.2.1: a code id_token bank through the hosted widget in Chromium',
    async (t) => {
      mkdirSync(SHOTS, { recursive: true });
      const pages = await widgetPages(t, {
        consentBank: { brasil: { authorizationResponses: 'code id_token' } },
      });
      // The bank's answer is posted back to the widget's callback, which goes on as after a redirect.
      const { hosted } = pages.consent(BRASIL, { shots: SHOTS });
      const landed = await hosted(t, 'en', {
        returnTo: '/return/br',
        state: 'st',
        named: true,
        viewport: DESKTOP,
        shots: 'hosted-en',
      });
      t.ok(landed.searchParams.get('exchange_token'), 'the app gets its exchange token');
      t.same(pages.problems, [], 'no script error and no Content-Security-Policy violation');
    },
  );
}
