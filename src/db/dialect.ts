import type { Engine } from './database.js';

/** `floor()` of a non-negative SQL expression: SQLite has no FLOOR without its math extension. */
export function floorSql(engine: Engine, expression: string): string {
  return engine === 'postgres' ? `FLOOR(${expression})` : `CAST(${expression} AS INTEGER)`;
}
