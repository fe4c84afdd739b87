/**
 * tap loads its process tracker (@tapjs/processinfo) into every test file, and the tracker adds itself,
 * through NODE_OPTIONS, to every process a test starts, whatever environment the test gives it. The suite
 * collects no coverage, so in a child it only costs: each `svc` process started 0.2 s later (0.27 s
 * against 0.47 s, idle), and each wrote a file under .tap/processinfo. This listener runs after the
 * tracker's on every spawn and takes the tracker back out of the child's environment.
 *
 * The tracker hooks spawns through process-on-spawn, whose listeners live in one global list.
 */
const SPAWN_HOOKS = Symbol.for('process-on-spawn@*:singletonId');
const TRACKER_VARIABLE = /^_TAPJS_PROCESSINFO_/;
const TRACKER_IMPORT = /^--(?:import|loader)=\S*@tapjs[/\\]processinfo\S*$/;

interface SpawnOptions {
  env: Record<string, string>;
}

const hooks = (globalThis as unknown as Record<symbol, { listeners: ((options: SpawnOptions) => void)[] }>)[
  SPAWN_HOOKS
];

export function withoutTracker(env: Record<string, string>): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (TRACKER_VARIABLE.test(name)) continue;
    if (name === 'NODE_OPTIONS') {
      // The tracker writes each option in double quotes; none of ours holds a space.
      const options = value
        .split(/\s+/)
        .map((option) => option.replace(/^"(.*)"$/, '$1'))
        .filter((option) => option && !TRACKER_IMPORT.test(option));
      if (options.length > 0) result[name] = options.join(' ');
      continue;
    }
    result[name] = value;
  }
  return result;
}

if (hooks && !hooks.listeners.some((listener) => listener.name === 'untrackedChild')) {
  hooks.listeners.push(function untrackedChild(options: SpawnOptions) {
    options.env = withoutTracker(options.env);
  });
}
