import t from 'tap';
import { pino } from 'pino';
import { accessLogWriter, createLogger, isoTimeField, type AccessLine } from '../../src/logging/logger.js';

/** A destination that keeps what is written to it. */
function capture(): { lines: string[]; write(line: string): void } {
  const lines: string[] = [];
  return { lines, write: (line) => void lines.push(line) };
}

/** The line without its time, which differs between two writes. */
const timeless = (line: string) => line.replace(/"time":"[^"]*"/, '"time":"…"');

const lines: AccessLine[] = [
  {
    request_id: 'req_0a1b2c3d00000001',
    method: 'GET',
    route: '/v1/accounts/{accountId}',
    status: 200,
    ms: 1.3,
    client: '127.0.0.1',
  },
  {
    request_id: 'client.supplied-ID_42',
    method: 'POST',
    route: 'unmatched',
    status: 429,
    ms: 12,
    client: '2001:db8::1',
    credential: 'key_0123456789abcdef',
  },
  {
    request_id: 'req_x',
    method: 'DELETE',
    route: '/v1/links/{linkId}',
    status: 500,
    ms: 0,
    client: '203.0.113.9',
    credential: undefined,
  },
];

t.test("the access line is the bytes pino's own info line would be", async (t) => {
  const destination = capture();
  const logger = createLogger({ level: 'info', name: 'api', destination });
  const write = accessLogWriter(logger);
  for (const line of lines) {
    logger.info(line, 'request');
    write(line);
  }
  const child = logger.child({ worker: 3 });
  child.info(lines[1], 'request');
  accessLogWriter(child)(lines[1]!);
  t.equal(destination.lines.length, 8);
  for (let i = 0; i < destination.lines.length; i += 2) {
    t.equal(timeless(destination.lines[i + 1]!), timeless(destination.lines[i]!));
    t.ok(JSON.parse(destination.lines[i + 1]!).time, 'with its time');
  }
});

t.test("the time is pino's isoTime, to the millisecond, across seconds", async (t) => {
  const start = Date.UTC(2026, 10, 26, 23, 59, 59, 990);
  const wrong: string[] = [];
  // Across a second and a day, and back again.
  for (const now of [start, start + 5, start + 10, start + 15, start + 110, start - 900, 0, 99, 1000, 1001]) {
    const expected = `,"time":"${new Date(now).toISOString()}"`;
    if (isoTimeField(now) !== expected) wrong.push(`${now}: ${isoTimeField(now)} instead of ${expected}`);
  }
  t.same(wrong, []);
});

t.test('nothing is written below the logger level, as pino would not', async (t) => {
  const destination = capture();
  const logger = createLogger({ level: 'warn', name: 'api', destination });
  const write = accessLogWriter(logger);
  write(lines[0]!);
  logger.level = 'info';
  write(lines[0]!);
  t.equal(destination.lines.length, 1, 'the level is read for each line');
});

t.test('a logger that changes lines (here a mixin) gets them through pino', async (t) => {
  const destination = capture();
  const logger = pino({ mixin: () => ({ extra: 1 }) }, destination);
  accessLogWriter(logger)(lines[0]!);
  t.match(JSON.parse(destination.lines[0]!), { extra: 1, msg: 'request', route: lines[0]!.route });
});
