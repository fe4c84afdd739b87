import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import type { Page } from 'playwright-core';
import { seriousViolations } from './axe.js';
import type { EngineName } from './harness.js';

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
