import { isAbsolute, join, relative } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Ajv } from 'ajv';
import { defaultConfig } from '../config/defaults.js';
import { maskUrl } from '../db/database-url.js';
import { restoreDecision, settingLeaves } from '../config/restore-policy.js';
import { configSchema } from '../config/schema.js';

/**
 * The archived config.json, kept only as far as the restore policy (config/restore-policy.ts) allows. A
 * restore takes every path from the target home and its flags: the database (`--database-url`, else
 * `<home>/svc.db`), the master key (`<home>/master.key`) and the home itself are never read from the
 * archive, because an archive's config.json could otherwise have the restore write its bytes anywhere the
 * operator may write (`masterKeyFile: "/root/.ssh/authorized_keys"`), or point svc at a database of its
 * choosing. Nor does it take, unless the operator names them (`--keep-config`), the settings that decide
 * where secrets, bank logins or traffic go or which key opens them: an archive's `banks.connectors` would
 * otherwise send every live bank login to its gateway, and its `masterKey` replace the restored key.
 *
 * Every other setting is kept when it is valid by the config schema and dropped otherwise; a log file is
 * kept only when it lay inside the archived home, and moves to the same place in the new one. What was
 * dropped is reported (a set-aside setting with its archived value beside the restored one, secrets
 * hidden), so the operator can see the difference and take it by name.
 */

export interface DroppedSetting {
  key: string;
  reason: string;
  /** A setting set aside for the operator: the archive's value and the one restored, secrets hidden. */
  archived?: unknown;
  restored?: unknown;
  /** What takes the archive's value instead. */
  keep?: string;
}

export interface KeptSetting {
  key: string;
  /** The archive's value, taken because `--keep-config` named it; secrets hidden. */
  value: unknown;
}

export interface SanitiseOptions {
  /** Settings the operator takes from the archive by name (`--keep-config`): set-aside ones only. */
  keep?: readonly string[];
  /** The target installation's own config.json (a restore with --force over one), whose values stay. */
  current?: Record<string, unknown> | null;
}

/** Files and folders of a home that svc writes itself (`svc.db-wal`, `svc.db-shm` by their prefix). */
const SVC_OWN_FILES = ['config.json', 'master.key', 'svc.db', 'backups', '.restore-staging'];

const ajv = new Ajv({ allErrors: false, strict: true });
type Properties = typeof configSchema.properties;
const validators = new Map(
  Object.entries(configSchema.properties as Properties)
    .filter(([key]) => restoreDecision(key).take !== 'target')
    .map(([key, schema]) => [key, ajv.compile(schema)]),
);

export function sanitiseConfig(
  archived: Record<string, unknown>,
  archivedHome: string,
  home: string,
  options: SanitiseOptions = {},
): { config: Record<string, unknown>; dropped: DroppedSetting[]; kept: KeptSetting[] } {
  const config: Record<string, unknown> = {};
  const dropped: DroppedSetting[] = [];
  const kept: KeptSetting[] = [];
  for (const [key, value] of Object.entries(archived)) {
    const decision = restoreDecision(key);
    if (decision.take === 'target') {
      dropped.push({ key, reason: decision.why });
      continue;
    }
    const validate = validators.get(key);
    if (!validate) {
      dropped.push({ key, reason: 'not a setting of this svc' });
      continue;
    }
    // structuredClone: the value is JSON, and validation must not see (or keep) anything but data.
    const copy = structuredClone(value);
    if (!validate(copy)) {
      dropped.push({ key, reason: `not valid (${validate.errors?.[0]?.message ?? 'invalid'})` });
      continue;
    }
    config[key] = copy;
  }

  const defaults = defaultConfig(home) as unknown as Record<string, unknown>;
  for (const path of settingLeaves()) {
    const decision = restoreDecision(path);
    if (decision.take !== 'operator') continue;
    const fromArchive = getPath(config, path);
    if (fromArchive === undefined) continue;
    if (options.keep?.includes(path)) {
      kept.push({ key: path, value: shown(path, fromArchive) });
      continue;
    }
    deletePath(config, path);
    const own = options.current ? getPath(options.current, path) : undefined;
    if (own !== undefined) setPath(config, path, structuredClone(own));
    const restored = own ?? getPath(defaults, path);
    if (isDeepStrictEqual(fromArchive, restored)) continue;
    dropped.push({
      key: path,
      reason: decision.why,
      archived: shown(path, fromArchive),
      restored: shown(path, restored),
      keep: `--keep-config ${path}`,
    });
  }

  const log = config.log as { file?: string } | undefined;
  if (log?.file) {
    const inside = isAbsolute(log.file) && isAbsolute(archivedHome) ? relative(archivedHome, log.file) : '';
    const ownFile = inside.split(/[\\/]/)[0]!;
    if (!inside || inside.startsWith('..') || isAbsolute(inside)) {
      delete log.file;
      dropped.push({ key: 'log.file', reason: 'a path outside the archived data directory' });
    } else if (SVC_OWN_FILES.some((name) => ownFile === name || ownFile.startsWith(`${name}-`))) {
      // Log lines appended to the key file or the database would leave the installation unable to start.
      delete log.file;
      dropped.push({ key: 'log.file', reason: `${ownFile} is svc's own file, not a log` });
    } else log.file = join(home, inside);
  }
  return { config, dropped, kept };
}

/**
 * A setting's value as the restore may print it: a secret as whether it is set, a connector's `secret`
 * hidden, a password in a URL masked.
 */
function shown(path: string, value: unknown): unknown {
  const decision = restoreDecision(path);
  if (decision.take === 'operator' && decision.secret) return value ? '(set, not shown)' : '(not set)';
  const hide = (item: unknown, key: string): unknown => {
    if (key === 'secret') return '(not shown)';
    if (typeof item === 'string') return maskUrl(item);
    if (Array.isArray(item)) return item.map((entry) => hide(entry, ''));
    if (item !== null && typeof item === 'object')
      return Object.fromEntries(Object.entries(item).map(([name, entry]) => [name, hide(entry, name)]));
    return item;
  };
  return hide(value, '');
}

function getPath(root: Record<string, unknown>, path: string): unknown {
  let node: unknown = root;
  for (const part of path.split('.')) {
    if (node === null || typeof node !== 'object' || Array.isArray(node) || !Object.hasOwn(node, part))
      return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

function deletePath(root: Record<string, unknown>, path: string): void {
  const parts = path.split('.');
  const parent = getPath(root, parts.slice(0, -1).join('.')) ?? (parts.length === 1 ? root : undefined);
  if (parent && typeof parent === 'object') delete (parent as Record<string, unknown>)[parts.at(-1)!];
}

function setPath(root: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = root;
  for (const part of parts.slice(0, -1)) {
    if (!Object.hasOwn(node, part) || typeof node[part] !== 'object' || node[part] === null) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts.at(-1)!] = value;
}
