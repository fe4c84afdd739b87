import { readFileSync } from 'node:fs';
import { CliError } from '../errors/cli-error.js';

/** Where a backup passphrase may come from, in this order. */
export const PASSPHRASE_ENV = 'SVC_BACKUP_PASSPHRASE';

/** The shortest passphrase svc backup accepts: scrypt slows guessing, it cannot save a four-letter word. */
export const MIN_PASSPHRASE_LENGTH = 12;

export interface PassphraseSources {
  /** `--passphrase-file`: the first line of the file. */
  file?: string;
  env: Record<string, string | undefined>;
  /** Standard input and standard error, for a prompt when both are a terminal. */
  terminal?: { input: NodeJS.ReadStream; output: NodeJS.WriteStream };
  /** Ask twice at a prompt (a backup: a typo there would make the archive unreadable). */
  confirm: boolean;
  /** What the passphrase is for, in the refusal that names the sources. */
  purpose: 'backup' | 'restore';
}

export function passphraseError(message: string): CliError {
  return new CliError('passphrase', message, 78);
}

/**
 * The passphrase from `--passphrase-file`, else SVC_BACKUP_PASSPHRASE, else a prompt without echo on a
 * terminal. It is never printed, and never taken from a command-line argument (where `ps` shows it).
 */
export async function readPassphrase(sources: PassphraseSources): Promise<string> {
  let passphrase: string;
  if (sources.file) {
    let text: string;
    try {
      text = readFileSync(sources.file, 'utf8');
    } catch (error) {
      throw passphraseError(`Cannot read the passphrase file ${sources.file}: ${(error as Error).message}`);
    }
    passphrase = text.split(/\r?\n/)[0] ?? '';
  } else if (sources.env[PASSPHRASE_ENV]) {
    passphrase = sources.env[PASSPHRASE_ENV]!;
  } else if (sources.terminal?.input.isTTY && sources.terminal.output.isTTY) {
    passphrase = await prompt(sources.terminal, 'Backup passphrase: ');
    if (sources.confirm && (await prompt(sources.terminal, 'Again: ')) !== passphrase)
      throw passphraseError('The two passphrases differ; nothing was written.');
  } else {
    throw passphraseError(
      sources.purpose === 'backup'
        ? `svc backup encrypts the archive (it holds the master key) and needs a passphrase: pass --passphrase-file FILE, set ${PASSPHRASE_ENV}, or run it on a terminal to be asked; --no-encrypt writes a plain archive.`
        : `This archive is encrypted: pass --passphrase-file FILE, set ${PASSPHRASE_ENV}, or run svc restore on a terminal to be asked.`,
    );
  }
  if (passphrase.length === 0) throw passphraseError('The passphrase is empty.');
  if (sources.purpose === 'backup' && passphrase.length < MIN_PASSPHRASE_LENGTH)
    throw passphraseError(
      `The passphrase is shorter than ${MIN_PASSPHRASE_LENGTH} characters; choose a longer one (several words).`,
    );
  return passphrase;
}

/** Reads one line from the terminal with echo off (raw mode), Ctrl-C aborting. */
async function prompt(
  terminal: { input: NodeJS.ReadStream; output: NodeJS.WriteStream },
  question: string,
): Promise<string> {
  const { input, output } = terminal;
  output.write(question);
  const wasRaw = input.isRaw;
  input.setRawMode(true);
  input.resume();
  try {
    return await new Promise<string>((resolve, reject) => {
      let typed = '';
      const onData = (data: Buffer) => {
        for (const char of data.toString('utf8')) {
          if (char === '\r' || char === '\n' || char === '\u0004') {
            input.off('data', onData);
            output.write('\n');
            resolve(typed);
            return;
          }
          if (char === '\u0003') {
            input.off('data', onData);
            output.write('\n');
            reject(passphraseError('Interrupted; nothing was written.'));
            return;
          }
          if (char === '\u007f' || char === '\b') typed = [...typed].slice(0, -1).join('');
          else typed += char;
        }
      };
      input.on('data', onData);
    });
  } finally {
    input.setRawMode(wasRaw);
    input.pause();
  }
}
