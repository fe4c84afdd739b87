import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { Page } from 'playwright-core';
import { BUILT_IN_INSTITUTIONS } from '../../src/banks/institutions.js';
import { CONSOLE_CATALOGUES } from '../../src/console/messages.js';
import {
  DEFAULT_ORGANISATION_NAME,
  DEFAULT_PUBLISHABLE_KEY_NAME,
  DEFAULT_SECRET_KEY_NAME,
} from '../../src/orgs/default-names.js';
import { seriousViolations } from './axe.js';
import { PASSWORD } from './console.js';
import type { EngineName, TestApp } from './harness.js';

/** Where the console's browser tests save their pictures (docs/console.md shows some of them). */
export const CONSOLE_SHOTS = join(process.cwd(), 'test-output', 'screenshots', 'console');

const VIEWPORTS = [
  ['desktop', { width: 1280, height: 800 }],
  ['phone', { width: 390, height: 844 }],
] as const;

/**
 * What every console page must pass in the browser: no serious or critical axe violation, and no sideways
 * scroll at desktop or phone width. On SQLite each page is also saved at both widths as `{prefix}{name}-…png`
 * (one engine's pictures are enough).
 */
export function consoleLook(t: Test, engine: EngineName, prefix = '') {
  mkdirSync(CONSOLE_SHOTS, { recursive: true });
  return async (page: Page, name: string): Promise<void> => {
    t.same(await seriousViolations(page), [], `${name}: no serious or critical accessibility violation`);
    for (const [size, viewport] of VIEWPORTS) {
      await page.setViewportSize(viewport);
      if (engine === 'sqlite')
        await page.screenshot({ path: join(CONSOLE_SHOTS, `${prefix}${name}-${size}.png`), fullPage: true });
      const overflow = (await page.evaluate(
        'document.documentElement.scrollWidth - window.innerWidth',
      )) as number;
      t.ok(overflow <= 1, `${name} at ${size} width has no sideways scroll (${overflow}px)`);
    }
    await page.setViewportSize(VIEWPORTS[0][1]);
  };
}

/**
 * The words of a text, lower-cased: tokens of letters only, once the punctuation around them is gone (an
 * identifier, an email, a number, a URL, `customer-17` is none).
 */
export function wordsOf(text: string): string[] {
  return text
    .split(/\s+/)
    .map((token) => token.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, ''))
    .filter((token) => token.length > 1 && /^[\p{L}’'-]+$/u.test(token))
    .map((token) => token.toLowerCase());
}

/**
 * Words that are English and not Spanish: every word of the console's English catalogue that its Spanish
 * one does not use too (`webhooks`, `endpoint`, `error`, `no` are both), and the values the API keeps as
 * English codes, which a page must translate rather than print (`savings`, `revoked`, a bank's code, the
 * names `svc install` gives). Any of them in a Spanish page is a string nobody translated.
 */
export function englishOnlyWords(): Set<string> {
  const { es, en } = CONSOLE_CATALOGUES;
  const spanish = new Set(Object.values(es).flatMap(wordsOf));
  const names = new Set(BUILT_IN_INSTITUTIONS.flatMap((bank) => wordsOf(bank.name)));
  const codes = [
    ...['checking', 'savings', 'credit', 'card'], // account types
    ...['secret', 'publishable', 'active', 'expiring', 'expired', 'revoked'], // keys
    ...['pending', 'succeeded', 'failed', 'queued', 'running', 'created', 'enabled', 'disabled'],
    ...['historical', 'full', 'backfill', 'latest', 'up', 'degraded', 'down', 'paused', 'never'],
    ...['default', 'organisation', 'organization', 'test', 'live', 'key', 'link', 'links', 'all', 'none'],
    ...BUILT_IN_INSTITUTIONS.map((bank) => bank.id).filter((id) => !names.has(id)),
    ...wordsOf([DEFAULT_ORGANISATION_NAME, DEFAULT_SECRET_KEY_NAME, DEFAULT_PUBLISHABLE_KEY_NAME].join(' ')),
  ];
  return new Set([...Object.values(en).flatMap(wordsOf), ...codes].filter((word) => !spanish.has(word)));
}

/**
 * The English words a person reads on the page, with where they are: its visible text, the options of its
 * menus, and the labels a screen reader says (`aria-label`, `title`, `placeholder`, the column names a
 * phone shows beside each value). Code (`<code>`, `<pre>`) and what a page marks `translate="no"` are data.
 */
export async function untranslatedWords(
  page: Page,
  english: Set<string>,
  /** Data the page cannot mark (the operator's name in the window's title). */
  data: readonly string[] = [],
): Promise<string[]> {
  // A string, evaluated in the page (the tests are compiled without the DOM's types).
  const texts = (await page.evaluate(`(() => {
    const data = 'code, pre, kbd, samp, script, style, [translate="no"]';
    const found = [document.title];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      if (!parent || parent.closest(data)) continue;
      if (parent.closest('option') || parent.checkVisibility()) found.push(node.textContent);
    }
    for (const element of document.querySelectorAll('[aria-label], [title], [placeholder], [data-label]')) {
      if (element.closest(data)) continue;
      for (const name of ['aria-label', 'title', 'placeholder', 'data-label'])
        found.push(element.getAttribute(name) || '');
    }
    return found;
  })()`)) as string[];
  const words = new Set<string>();
  for (const text of texts.map((text) => data.reduce((left, value) => left.replaceAll(value, ' '), text)))
    for (const word of wordsOf(text))
      if (english.has(word)) words.add(`${word} («${text.trim().slice(0, 60)}»)`);
  return [...words];
}

/** Whether the page is wider than the window (it scrolls sideways), and by how much. */
export async function sidewaysScroll(page: Page): Promise<number> {
  return (await page.evaluate(
    '(document.scrollingElement ?? document.documentElement).scrollWidth - window.innerWidth',
  )) as number;
}

/**
 * An invitation's link opened in the browser: the password chosen twice, then signed in on `landing` (the
 * organisation's overview in test mode, for a user of one).
 */
export async function acceptInBrowser(
  page: Page,
  app: Pick<TestApp, 'url'>,
  token: string,
  landing: string,
): Promise<void> {
  await page.goto(`${app.url}/console/accept/${token}`);
  await page.getByLabel('New password').fill(PASSWORD);
  await page.getByLabel('Repeat the password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Save and sign in' }).click();
  await page.waitForURL(landing);
}
