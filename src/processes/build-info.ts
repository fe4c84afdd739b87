import { readFileSync } from 'node:fs';

/** Which build this is: package.json's version and the commit `npm run build` saw (scripts/build-info.js). */
export interface BuildInfo {
  version: string;
  /** The commit's first 12 hex digits; null outside a git checkout. */
  commit: string | null;
  /** Built with uncommitted changes to the code. */
  dirty: boolean;
  /** When `npm run build` ran (ISO 8601); null when unknown. */
  builtAt: string | null;
}

let cached: BuildInfo | null = null;

/** This build, read once from dist/build-info.json beside the compiled code. */
export function thisBuild(): BuildInfo {
  if (cached) return cached;
  const read = (path: string) => JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as unknown;
  try {
    const info = read('../../build-info.json') as Partial<BuildInfo>;
    cached = {
      version: String(info.version),
      commit: info.commit ?? null,
      dirty: info.dirty === true,
      builtAt: info.builtAt ?? null,
    };
  } catch {
    // Built by something other than `npm run build`: the version is still package.json's.
    const pkg = read('../../../package.json') as { version: string };
    cached = { version: pkg.version, commit: null, dirty: false, builtAt: null };
  }
  return cached;
}

/**
 * The build as one semantic version with the commit as build metadata (`0.8.0+1a2b3c4d5e6f`, `…-dirty` when
 * built with uncommitted changes): what serve_instances, backups and `svc status` record and show.
 */
export function buildLabel(info: BuildInfo = thisBuild()): string {
  if (!info.commit) return info.version;
  return `${info.version}+${info.commit}${info.dirty ? '.dirty' : ''}`;
}

/** `svc 0.8.0 (commit 1a2b3c4d5e6f)`, for a person. */
export function describeBuild(info: BuildInfo = thisBuild()): string {
  const commit = info.commit
    ? `commit ${info.commit}${info.dirty ? ', with uncommitted changes' : ''}`
    : 'commit unknown';
  return `svc ${info.version} (${commit})`;
}
