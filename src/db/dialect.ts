/** The two engines: SQLite on one box, Postgres at scale. Dialect differences are settled in src/db/ only. */
export type Engine = 'sqlite' | 'postgres';

/** `floor()` of a non-negative SQL expression: SQLite has no FLOOR without its math extension. */
export function floorSql(engine: Engine, expression: string): string {
  return engine === 'postgres' ? `FLOOR(${expression})` : `CAST(${expression} AS INTEGER)`;
}
