import t from 'tap';
import { formatDoctorChecks } from '../../src/cli/views/doctor-view.js';
import { outputWidth, wrapText } from '../../src/cli/views/wrap.js';
import { prettyLine, resolveLogFormat } from '../../src/logging/pretty.js';

t.test('a log line as a person reads it', async (t) => {
  const json = (entry: object) => JSON.stringify(entry) + '\n';
  t.equal(
    prettyLine(
      json({
        level: 30,
        time: '2026-11-28T12:52:36.782Z',
        role: 'api',
        pid: 8570,
        url: 'http://127.0.0.1:8080',
        msg: 'api listening',
      }),
    ),
    '12:52:36.782 INFO  api  api listening url=http://127.0.0.1:8080\n',
    'time of day, level, role, message, then the fields; no pid',
  );
  t.equal(
    prettyLine(
      json({
        level: 30,
        time: '2026-11-28T12:52:45.994Z',
        role: 'api',
        pid: 1,
        request_id: 'req_1',
        method: 'GET',
        route: '/v1/links',
        status: 200,
        ms: 9.6,
        msg: 'request',
      }),
    ),
    '12:52:45.994 INFO  api  GET /v1/links 200 9.6 ms request_id=req_1\n',
    'an access line reads as one',
  );
  const long = json({
    level: 30,
    time: 't',
    role: 'scheduler',
    msg: 'housekeeping done',
    detail: 'x'.repeat(300),
  });
  const cut = prettyLine(long, 80);
  t.equal(cut.trimEnd().length, 80, 'an info line is cut to the width');
  t.ok(cut.trimEnd().endsWith('…'), 'and says so');
  const warning = json({ level: 40, time: 't', role: 'api', msg: 'metrics off', reason: 'y'.repeat(300) });
  t.ok(prettyLine(warning, 80).includes('y'.repeat(300)), 'a warning is shown whole');
  const error = prettyLine(
    json({
      level: 50,
      time: 't',
      role: 'api',
      msg: 'boom',
      err: { message: 'bad', stack: 'Error: bad\n    at x' },
    }),
    80,
  );
  t.match(error, /ERROR api {2}boom err=bad\n {4}Error: bad\n {4} {4}at x\n$/, "an error's stack follows it");
  t.equal(
    prettyLine(json({ level: 30, time: 't', role: 'api', msg: 'name', bank: 'a\u001b[2Jb c' })),
    't INFO  api  name bank="a\\\\u001b[2Jb c"\n',
    "a bank's text cannot drive the terminal",
  );
  t.equal(prettyLine('not json'), 'not json\n', 'other text passes');
});

t.test('which format a process logs in', async (t) => {
  t.equal(resolveLogFormat('auto', false, true), 'pretty', 'a terminal gets readable lines');
  t.equal(resolveLogFormat('auto', false, false), 'json', 'journald and pipes get JSON');
  t.equal(resolveLogFormat('auto', true, true), 'json', 'a log file is JSON');
  t.equal(resolveLogFormat('pretty', true, true), 'json', 'even when asked otherwise');
  t.equal(resolveLogFormat('json', false, true), 'json', 'JSON on a terminal when asked');
  t.equal(resolveLogFormat('pretty', false, false), 'pretty');
});

t.test('text wraps at spaces, and a word wider than the line is cut', async (t) => {
  t.same(wrapText('one two three four', 9), ['one two', 'three', 'four']);
  t.same(wrapText('abcdefghijkl', 5), ['abcde', 'fghij', 'kl']);
  t.same(wrapText('', 10), ['']);
  t.equal(outputWidth({ columns: 132 }, {}), 132, "the terminal's width");
  t.equal(outputWidth({}, { COLUMNS: '90' }), 90, 'else COLUMNS');
  t.equal(outputWidth({}, {}), 100, 'else 100');
  t.equal(outputWidth({ columns: 20 }, {}), 60, 'never under 60');
});

t.test("doctor's rows fit the width with each fix under its check", async (t) => {
  const lines = formatDoctorChecks(
    [
      { check: 'node', status: 'ok', detail: 'Node.js v20.20.2', fix: null },
      {
        check: 'metrics-port',
        status: 'warn',
        detail: '127.0.0.1:9464 is held by another program: svc serve starts without metrics',
        fix: "Stop what listens on 127.0.0.1:9464 (`ss -ltnp 'sport = :9464'` names it), or set metrics.port (SVC_METRICS_PORT) to a free port.",
      },
      { check: 'disk', status: 'ok', detail: '40 GiB free', fix: null },
    ],
    64,
  );
  t.same(lines, [
    'CHECK         STATUS  DETAIL',
    'node          ok      Node.js v20.20.2',
    'metrics-port  warn    127.0.0.1:9464 is held by another program:',
    '                      svc serve starts without metrics',
    '                      fix: Stop what listens on 127.0.0.1:9464',
    "                      (`ss -ltnp 'sport = :9464'` names it), or",
    '                      set metrics.port (SVC_METRICS_PORT) to a',
    '                      free port.',
    'disk          ok      40 GiB free',
  ]);
  t.ok(
    lines.every((line) => line.length <= 64),
    'no line is wider than asked',
  );
});
