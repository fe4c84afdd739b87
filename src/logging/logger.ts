import { pino, destination, stdTimeFunctions, symbols, type Logger, type DestinationStream } from 'pino';
import { prettyLine, type LogFormat } from './pretty.js';

export type { Logger };

/**
 * JSON lines on stdout. No code passes a secret to the logger (log objects carry ids, never credentials);
 * redaction of the likely top-level names is a second line of defence. Wildcard paths would double the
 * cost of every line (measured 111k against 250k lines/s), so the paths stay flat.
 *
 * Lines are handed to the file or stdout in batches of 16 KiB rather than one write per line: one
 * asynchronous write per request took a third of a small request's time, and even sonic-boom's own batching
 * (`minLength`) cost 5 µs a line, as it measures the whole waiting batch again for each line it adds. A batch
 * is also written once it is a second old, so that a quiet process's lines (its start, a warning at night)
 * reach the journal at once; `flushLogger` empties the batch on a clean exit. Every line goes through the
 * one batch, so lines keep their order.
 */
export function createLogger(options: {
  level: string;
  name: string;
  file?: string;
  destination?: DestinationStream;
  /** `pretty` for a person at a terminal (pretty.ts); JSON lines otherwise. */
  format?: LogFormat;
}): Logger {
  return pino(
    {
      level: options.level,
      base: { role: options.name, pid: process.pid },
      timestamp: stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'authorization',
          'password',
          'secret',
          'credentials',
          'token',
          'code',
          'headers.authorization',
        ],
        censor: '[redacted]',
      },
    },
    options.destination ?? batchedDestination(options.file, options.format === 'pretty'),
  );
}

const BATCH_MAX_AGE_MS = 1000;
const BATCH_BYTES = 16 * 1024;

function batchedDestination(file: string | undefined, pretty: boolean): DestinationStream {
  const batch = new LineBatch(
    destination({ dest: file || 1, mkdir: true, append: true, sync: false }),
    // Read at each line, so that a resized terminal gets lines of its new width.
    pretty ? (line) => prettyLine(line, process.stdout.columns || undefined) : (line) => line,
  );
  setInterval(() => {
    try {
      batch.flush();
    } catch {
      // not open yet, or already closed: nothing to write
    }
  }, BATCH_MAX_AGE_MS).unref();
  return batch;
}

/** Log lines waiting in memory, handed to the destination together. */
class LineBatch implements DestinationStream {
  private lines: string[] = [];
  private length = 0;

  constructor(
    private readonly target: ReturnType<typeof destination>,
    private readonly view: (line: string) => string,
  ) {}

  write(json: string): void {
    const line = this.view(json);
    this.lines.push(line);
    this.length += line.length;
    if (this.length >= BATCH_BYTES) this.handOver();
  }

  /** pino's `logger.flush(cb)` calls this. */
  flush(done?: (error?: Error) => void): void {
    this.handOver();
    this.target.flush(done);
  }

  private handOver(): void {
    if (this.lines.length === 0) return;
    const text = this.lines.join('');
    this.lines = [];
    this.length = 0;
    this.target.write(text);
  }
}

/** Writes out the batched lines; call it before a process exits. */
export function flushLogger(logger: Logger): Promise<void> {
  return new Promise((resolve) => {
    try {
      logger.flush(() => resolve());
    } catch {
      resolve(); // a destination that was never opened has nothing to flush
    }
  });
}

export const silentLogger: Logger = pino({ level: 'silent' });

/** What a request's access line carries (request-context.ts). */
export interface AccessLine {
  request_id: string;
  method: string;
  route: string;
  status: number;
  ms: number;
  /** The client's address (net/client-address.ts: the proxy's client behind a trusted proxy). */
  client: string;
  credential?: string;
}

/**
 * Writes requests' access lines: the bytes `logger.info(fields, 'request')` writes, put together directly.
 * pino's general path (the hooks, mixin, serializers and redaction it checks for each key, its escaping of
 * any text) cost about 12 µs of a one-row GET's CPU, 4% of it (bench/api-overhead.ts). The fields are ASCII
 * by construction (ids, an HTTP method, a route template), so `JSON.stringify` writes them as pino does.
 * Where the logger does anything this would skip (a hook, a mixin, a formatter, a serializer or redaction
 * of these names, a destination that wants metadata, a message prefix), the line goes through pino.
 */
export function accessLogWriter(logger: Logger): (line: AccessLine) => void {
  const internal = logger as unknown as Record<symbol, unknown>;
  const hooks = internal[symbols.hooksSym] as { streamWrite?: unknown; logMethod?: unknown } | undefined;
  const formatters = internal[symbols.formattersSym] as { log?: unknown } | undefined;
  const serializers = (internal[symbols.serializersSym] ?? {}) as Record<string, unknown>;
  const stringifiers = (internal[symbols.stringifiersSym] ?? {}) as Record<string | symbol, unknown>;
  const stream = internal[symbols.streamSym] as
    ({ write(line: string): void } & Record<symbol, unknown>) | undefined;
  const names = ['request_id', 'method', 'route', 'status', 'ms', 'client', 'credential', 'msg'];
  const plain =
    stream !== undefined &&
    stream[symbols.needsMetadataGsym] !== true &&
    !internal[symbols.mixinSym] &&
    !hooks?.streamWrite &&
    !hooks?.logMethod &&
    !formatters?.log &&
    internal[(symbols as unknown as Record<string, symbol>).msgPrefixSym!] === undefined &&
    !internal[symbols.nestedKeySym] &&
    internal[symbols.messageKeySym] === 'msg' &&
    !stringifiers[symbols.wildcardFirstSym] &&
    names.every((name) => !serializers[name] && !stringifiers[name]);
  if (!plain) return (line) => logger.info(line, 'request');
  const levels = internal[symbols.lsCacheSym] as Record<number, string>;
  const configuredTime = internal[symbols.timeSym] as () => string;
  const time = configuredTime === stdTimeFunctions.isoTime ? isoTimeField : configuredTime;
  const end = internal[symbols.endSym] as string;
  const info = logger.levels.values.info!;
  return (line) => {
    if (!logger.isLevelEnabled('info')) return;
    // Read per line: a child's bindings are fixed, but `setBindings` may change them.
    const bindings = internal[symbols.chindingsSym] as string;
    const credential =
      line.credential === undefined ? '' : `,"credential":${JSON.stringify(line.credential)}`;
    stream.write(
      `${levels[info]}${time()}${bindings},"request_id":${JSON.stringify(line.request_id)},"method":${JSON.stringify(line.method)},"route":${JSON.stringify(line.route)},"status":${line.status},"ms":${line.ms},"client":${JSON.stringify(line.client)}${credential},"msg":"request"${end}`,
    );
  };
}

let isoSecond = NaN;
let isoSecondText = '';

/**
 * pino's `isoTime` field, `,"time":"2026-11-26T01:40:00.123Z"`, from the text of the current second and the
 * milliseconds: formatting a Date for each line was a third of an access line's CPU (about 1 µs).
 */
export function isoTimeField(now = Date.now()): string {
  const ms = now % 1000;
  const second = now - ms;
  if (second !== isoSecond) {
    isoSecond = second;
    isoSecondText = `,"time":"${new Date(second).toISOString().slice(0, 20)}`;
  }
  return `${isoSecondText}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
}
