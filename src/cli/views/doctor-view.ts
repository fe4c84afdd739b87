import type { CheckResult } from '../../doctor/checks.js';
import { printable } from './format.js';
import { wrapText } from './wrap.js';

/**
 * `svc doctor` for a person: one row per check, its detail wrapped to the width in its own column and the
 * fix on the lines under it, so that each fix stays beside its check however narrow the terminal (one table
 * with a FIX column was about 290 characters wide, and a terminal wrapped each fix far from its row).
 */
export function formatDoctorChecks(checks: readonly CheckResult[], width: number): string[] {
  const nameWidth = Math.max('CHECK'.length, ...checks.map((c) => printable(c.check).length));
  const statusWidth = 'STATUS'.length;
  const indent = nameWidth + 2 + statusWidth + 2;
  // A very long check name (a connector's bank id) still leaves the detail 30 columns.
  const textWidth = Math.max(30, width - indent);
  const pad = ' '.repeat(indent);
  const lines = [`${'CHECK'.padEnd(nameWidth)}  ${'STATUS'.padEnd(statusWidth)}  DETAIL`];
  for (const check of checks) {
    const detail = wrapText(printable(check.detail), textWidth);
    const fix = check.fix === null ? [] : wrapText(`fix: ${printable(check.fix)}`, textWidth);
    const head = `${printable(check.check).padEnd(nameWidth)}  ${check.status.padEnd(statusWidth)}  `;
    lines.push(`${head}${detail[0]}`.trimEnd());
    for (const line of [...detail.slice(1), ...fix]) lines.push(`${pad}${line}`);
  }
  return lines;
}
