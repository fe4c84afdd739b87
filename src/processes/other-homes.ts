import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** A `svc serve` of this machine, found by its children. */
export interface ServeOnThisMachine {
  /** The supervisor's pid. */
  pid: number;
  home: string;
}

/** A child of `svc serve` (processes/child.ts): its command line ends with the role it runs. */
const CHILD = /\/processes\/child\.js$/;

/** A child of a `svc serve` seen in /proc: its supervisor, command line and home. */
export interface ServeChild {
  /** The supervisor's pid. */
  ppid: number;
  argv: string[];
  /** Its SVC_HOME, resolved; null when /proc does not show another user's environment. */
  home: string | null;
}

/**
 * Every child of a `svc serve` on this machine that /proc lists (processes/child.ts by its command line, which
 * is world-readable). Each supervisor gives its children `SVC_HOME` (supervisor.ts), so their environment
 * names the home whatever flag or default the supervisor had; another user's environment is not readable.
 * Outside Linux this finds nothing. `svc upgrade` and the CLI's other-home hint both read it.
 */
export function serveChildren(proc = '/proc'): ServeChild[] {
  let pids: string[];
  try {
    pids = readdirSync(proc).filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const children: ServeChild[] = [];
  for (const pid of pids) {
    try {
      const argv = readFileSync(`${proc}/${pid}/cmdline`, 'utf8').split('\0');
      if (!argv.some((arg) => CHILD.test(arg))) continue;
      // /proc/PID/stat: "pid (comm) state ppid …"; comm may hold spaces, so read after its closing paren.
      const stat = readFileSync(`${proc}/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!(ppid > 1)) continue;
      let home: string | null = null;
      try {
        const entry = readFileSync(`${proc}/${pid}/environ`, 'utf8')
          .split('\0')
          .find((line) => line.startsWith('SVC_HOME='));
        if (entry) home = resolve(entry.slice('SVC_HOME='.length));
      } catch {
        // another user's process: its home stays unknown
      }
      children.push({ ppid, argv, home });
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

/** Every `svc serve` running on this machine whose home this user may see. */
export function servesOnThisMachine(proc = '/proc'): ServeOnThisMachine[] {
  const found = new Map<number, string>();
  for (const child of serveChildren(proc)) if (child.home) found.set(child.ppid, child.home);
  return [...found].map(([pid, home]) => ({ pid, home })).sort((a, b) => a.pid - b.pid);
}

/**
 * When no `svc serve` runs from `home` but one runs from another data directory: a sentence that names it
 * and how to point the CLI at it; null otherwise. (A command run without `--home` acts on `~/.svc`, while
 * the server a person started with `--home ~/svc-demo` serves another database.)
 */
export function otherHomeHint(home: string, serves: readonly ServeOnThisMachine[]): string | null {
  const here = resolve(home);
  if (serves.some((serve) => serve.home === here)) return null;
  const others = serves.filter((serve) => serve.home !== here);
  if (others.length === 0) return null;
  const [first] = others;
  const list = others.map((serve) => `${serve.home} (pid ${serve.pid})`).join(', ');
  return `No svc serve runs from ${here}, but ${others.length === 1 ? 'one runs' : 'some run'} on this machine from ${list}: add --home ${first!.home} (or export SVC_HOME=${first!.home}) to act on ${others.length === 1 ? 'it' : 'one'}.`;
}
