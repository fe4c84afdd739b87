import { pino, destination, stdTimeFunctions, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout. Redaction is the second line of defence: no code passes a secret to the logger,
 * but a header or body that slips into a log object is masked by path.
 */
export function createLogger(options: {
  level: string;
  name: string;
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
          '*.authorization',
          'headers.authorization',
          '*.headers.authorization',
          'password',
          '*.password',
          'secret',
          '*.secret',
          'credentials',
          '*.credentials',
          'token',
          '*.token',
          'code',
          'body.code',
        ],
        censor: '[redacted]',
      },
    },
    options.destination ?? destination({ sync: false }),
  );
}

export const silentLogger: Logger = pino({ level: 'silent' });
