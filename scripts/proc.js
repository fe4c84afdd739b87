// Processes as Linux's /proc shows them, for the checks that nothing a test run started outlives it
// (scripts/test.js, scripts/leftovers.js). Every reader throws when the process is gone meanwhile.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** Every pid there is; none where there is no /proc (not Linux), so the checks find nothing there. */
export function pids() {
  try {
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .map(Number);
  } catch {
    return [];
  }
}

/** Fields 3, 4 and 22 of proc(5): the state (`Z` for a zombie), the parent, and the start in clock ticks. */
export function procStat(pid) {
  // The command name (field 2) is in parentheses and may hold spaces: the fields after it are split.
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0], ppid: Number(fields[1]), startTicks: Number(fields[19]) };
}

/** The command line, its arguments joined by spaces, cut at 300 characters. */
export function commandLine(pid) {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 300);
}

export function environment(pid) {
  return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
}

export function workingDirectory(pid) {
  return readlinkSync(`/proc/${pid}/cwd`);
}
