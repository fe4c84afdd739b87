import { isAbsolute, join, relative } from 'node:path';
import { Ajv } from 'ajv';
import { configSchema } from '../config/schema.js';

/**
 * The archived config.json, kept only as far as it cannot choose a path or run code. A restore takes every
 * path from the target home and its flags: the database (`--database-url`, else `<home>/svc.db`), the
 * master key (`<home>/master.key`) and the home itself are never read from the archive, because an
 * archive's config.json could otherwise have the restore write its bytes anywhere the operator may write
 * (`masterKeyFile: "/root/.ssh/authorized_keys"`), or point svc at a database of its choosing.
 *
 * Every other top-level setting is kept when it is valid by the config schema and dropped otherwise; a log
 * file is kept only when it lay inside the archived home, and moves to the same place in the new one. What
 * was dropped is reported, so the operator can set it again by hand.
 */

export interface DroppedSetting {
  key: string;
  reason: string;
}

/** Settings a restore decides itself, from the target home and flags. */
const PATHS_FROM_TARGET: Record<string, string> = {
  home: 'the data directory is the one restored into',
  databaseUrl: 'the database is --database-url, else <home>/svc.db',
  masterKeyFile: 'the key goes to <home>/master.key',
};

const ajv = new Ajv({ allErrors: false, strict: true });
type Properties = typeof configSchema.properties;
const validators = new Map(
  Object.entries(configSchema.properties as Properties)
    .filter(([key]) => !(key in PATHS_FROM_TARGET))
    .map(([key, schema]) => [key, ajv.compile(schema)]),
);

export function sanitiseConfig(
  archived: Record<string, unknown>,
  archivedHome: string,
  home: string,
): { config: Record<string, unknown>; dropped: DroppedSetting[] } {
  const config: Record<string, unknown> = {};
  const dropped: DroppedSetting[] = [];
  for (const [key, value] of Object.entries(archived)) {
    if (key in PATHS_FROM_TARGET) {
      dropped.push({ key, reason: PATHS_FROM_TARGET[key]! });
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
  const log = config.log as { file?: string } | undefined;
  if (log?.file) {
    const inside = isAbsolute(log.file) && isAbsolute(archivedHome) ? relative(archivedHome, log.file) : '';
    if (inside && !inside.startsWith('..') && !isAbsolute(inside)) log.file = join(home, inside);
    else {
      delete log.file;
      dropped.push({ key: 'log.file', reason: 'a path outside the archived data directory' });
    }
  }
  return { config, dropped };
}
