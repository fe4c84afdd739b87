import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { installedHome, runCli } from '../helpers/cli.js';

/*
 * `banks.institutions` as an operator meets it on the command line: a bad entry stops any command with one
 * line naming the setting, and `svc banks register` takes an added institution's code (docs/open-finance.md,
 * "Adding an institution"). SQLite only: nothing here depends on the engine.
 */
const andino = {
  id: 'bancoandino',
  name: 'Banco Andino',
  country: 'CL',
  connection: 'consent',
  profile: { security: 'fapi2-cl', data: ['ob-br-accounts-2'], covers: ['accounts'], maxDurationMonths: 12 },
  products: ['movements'],
  holderTypes: ['individual'],
};

t.test('svc and banks.institutions', async (t) => {
  const { home } = await installedHome(t, 'sqlite');
  const configFile = join(home, 'config.json');
  const installed = JSON.parse(readFileSync(configFile, 'utf8'));
  const withInstitutions = (institutions: unknown[]) =>
    writeFileSync(configFile, JSON.stringify({ ...installed, banks: { connectors: {}, institutions } }));
  // Files the flags require to exist; the checks before any call to the bank refuse their contents later.
  const file = (name: string) => {
    const path = join(home, name);
    writeFileSync(path, 'placeholder');
    return path;
  };
  const register = (bank: string) =>
    runCli(
      [
        'banks',
        'register',
        bank,
        '--issuer',
        'http://bank.example',
        '--api-base',
        'https://api.bank.example',
        '--software-statement',
        file('ssa.jwt'),
        '--cert',
        file('client.pem'),
        '--key',
        file('client.key'),
      ],
      { home },
    );

  withInstitutions([{ ...andino, id: 'bci' }]);
  let result = await register('bancoandino');
  t.not(result.code, 0);
  t.match(
    result.message,
    /Invalid configuration: banks\.institutions\.0\.id is "bci", a built-in bank's code: choose another id/,
  );
  t.notMatch(result.stderr, /at .*\.js:\d+/, 'a message, not a stack trace');

  withInstitutions([{ ...andino, profile: { ...andino.profile, security: 'fapi3' } }]);
  result = await register('bancoandino');
  t.not(result.code, 0);
  t.match(
    result.message,
    /banks\.institutions\.0\.profile\.security must be equal to one of the allowed values/,
  );

  withInstitutions([]);
  result = await register('bancoandino');
  t.not(result.code, 0);
  t.match(result.message, /Unknown bank 'bancoandino'/, 'not configured: unknown');

  withInstitutions([andino]);
  result = await register('bancoandino');
  t.not(result.code, 0);
  t.notMatch(result.message, /Unknown bank/, 'configured: the bank is accepted');
  t.match(result.message, /--issuer must be an https:\/\/ URL/, 'and the next check speaks');
});
