import t from 'tap';
import { isUnavailableError } from '../../src/db/errors.js';

t.test('errors of a database that went away are 503s, not 500s', async (t) => {
  const unavailable: [string, object][] = [
    [
      'a refused connection',
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    ],
    ['a reset connection', Object.assign(new Error('BEGIN; - read ECONNRESET'), { code: 'ECONNRESET' })],
    ['Postgres shutting down', Object.assign(new Error('terminating connection'), { code: '57P01' })],
    ['a connection dropped mid-statement', new Error('COMMIT; - Connection terminated unexpectedly')],
    // What knex's ROLLBACK gets from pg on a connection that has just dropped (seen in db-outage under load).
    [
      'a rollback on a dropped connection',
      new Error('ROLLBACK - Client has encountered a connection error and is not queryable'),
    ],
    ['an exhausted pool', new Error('Knex: Timeout acquiring a connection. The pool is probably full.')],
    ['SQLite busy', Object.assign(new Error('SQLITE_BUSY: database is locked'), { code: 'SQLITE_BUSY' })],
  ];
  for (const [label, error] of unavailable) t.ok(isUnavailableError(error), label);

  const ours: [string, unknown][] = [
    ['a unique violation', Object.assign(new Error('duplicate key'), { code: '23505' })],
    ['a programming error', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['nothing', undefined],
  ];
  for (const [label, error] of ours) t.notOk(isUnavailableError(error), `${label} stays a 500`);
});
