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

/**
 * Every `svc serve` running on this machine that this user may see, with its data directory. Each supervisor
 * gives its children `SVC_HOME` (supervisor.ts), so reading their environment in /proc finds the home
 * whatever flag or default the supervisor had. Processes of other users are not readable and are left out;
 * outside Linux this finds nothing.
 */
export function servesOnThisMachine(proc = '/proc'): ServeOnThisMachine[] {
  const found = new Map<number, string>();
  let pids: string[];
  try {
    pids = readdirSync(proc).filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  for (const pid of pids) {
    try {
      const argv = readFileSync(`${proc}/${pid}/cmdline`, 'utf8').split('\0');
      if (!argv.some((arg) => CHILD.test(arg))) continue;
      const environ = readFileSync(`${proc}/${pid}/environ`, 'utf8').split('\0');
      const home = environ.find((entry) => entry.startsWith('SVC_HOME='))?.slice('SVC_HOME='.length);
      // /proc/PID/stat: "pid (comm) state ppid …"; comm may hold spaces, so read after its closing paren.
      const stat = readFileSync(`${proc}/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (home && ppid > 1) found.set(ppid, resolve(home));
    } catch {
      // gone meanwhile, or another user's
    }
  }
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
