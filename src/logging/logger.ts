import { pino, destination, stdTimeFunctions, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout. No code passes a secret to the logger (log objects carry ids, never credentials);
 * redaction of the likely top-level names is a second line of defence. Wildcard paths would double the
 * cost of every line (measured 111k against 250k lines/s), so the paths stay flat.
 *
 * Lines are written in batches of 4 KiB rather than one write per line: one asynchronous write per request
 * took a third of a small request's time. A batch is also written once it is a second old, so that a quiet
 * process's lines (its start, a warning at night) reach the journal at once; `flushLogger` empties the
 * batch on a clean exit.
 */
export function createLogger(options: {
  level: string;
  name: string;
  file?: string;
  destination?: DestinationStream;
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
    options.destination ?? batchedDestination(options.file),
  );
}

const BATCH_MAX_AGE_MS = 1000;

function batchedDestination(file: string | undefined): DestinationStream {
  const stream = destination({ dest: file || 1, mkdir: true, append: true, sync: false, minLength: 4096 });
  setInterval(() => {
    try {
      stream.flush();
    } catch {
      // not open yet, or already closed: nothing to write
    }
  }, BATCH_MAX_AGE_MS).unref();
  return stream;
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
