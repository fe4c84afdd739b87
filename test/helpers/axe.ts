import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Frame, Page } from 'playwright-core';

const require = createRequire(import.meta.url);
/** axe-core's browser build, evaluated in the page through the DevTools protocol (no script tag, so no CSP). */
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * The page's serious and critical accessibility violations (WCAG 2.1 A and AA rules), as axe-core finds them;
 * a frame's (the embedded widget's) when given one.
 */
export async function seriousViolations(page: Page | Frame): Promise<AxeViolation[]> {
  const violations = (await page.evaluate(`(async () => {
    if (!window.axe) { ${AXE_SOURCE} }
    const result = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')) }));
  })()`)) as AxeViolation[];
  return violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
}
