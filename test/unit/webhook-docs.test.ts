import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { signatureHeader } from '../../src/webhooks/signature.js';

/** The verification code docs/webhooks.md gives receivers, run as a receiver would run it. */
const DOC = readFileSync(new URL('../../../docs/webhooks.md', import.meta.url), 'utf8');
const EXAMPLES = new URL('../../../docs/examples/', import.meta.url);

function block(language: string, marker: string): string {
  const blocks = [...DOC.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map(
    (m) => m[1]!,
  );
  const found = blocks.find((code) => code.includes(marker));
  if (!found) throw new Error(`no ${language} block with ${marker} in docs/webhooks.md`);
  return found;
}

const secret = 'whsec_docs0123456789abcdefghijklmnopqrstu';
const other = 'whsec_other123456789abcdefghijklmnopqrstu';
const body =
  '{"object":"event","id":"evt_0123456789abcdef","type":"link.created","data":{"name":"Señora Ñuñoa"}}';
const now = Math.floor(Date.now() / 1000);
const cases: [string, string, string, number, boolean][] = [
  ['good', body, signatureHeader([secret], now, body), now, true],
  ['during a roll', body, signatureHeader([other, secret], now, body), now, true],
  ['tampered body', body.replace('created', 'deleted'), signatureHeader([secret], now, body), now, false],
  ['wrong secret', body, signatureHeader([other], now, body), now, false],
  ['too old', body, signatureHeader([secret], now - 301, body), now, false],
  ['from the future', body, signatureHeader([secret], now + 301, body), now, false],
  ['no header', body, '', now, false],
];

t.test('the Node verifier: the page shows docs/examples/verify-signature.mjs as it is', async (t) => {
  for (const file of ['verify-signature.mjs', 'webhook-receiver.mjs']) {
    const example = readFileSync(new URL(file, EXAMPLES), 'utf8');
    t.equal(block('js', `// ${file}:`), example, `docs/webhooks.md shows ${file} whole`);
  }
  t.notMatch(DOC, /from 'svc-appliance'/, 'no import of a package a reader cannot install');
});

/** What docs/examples/verify-signature.mjs exports. */
interface NodeVerifier {
  verifySignature: (
    raw: Buffer | string,
    header: string,
    secret: string,
    tolerance?: number,
    nowMs?: number,
  ) => boolean;
}

t.test('the Node verifier, imported from docs/examples as a receiver would', async (t) => {
  const { verifySignature } = (await import(new URL('verify-signature.mjs', EXAMPLES).href)) as NodeVerifier;
  for (const [name, raw, header, at, expected] of cases) {
    t.equal(verifySignature(Buffer.from(raw), header, secret, 300, at * 1000), expected, name);
    t.equal(verifySignature(raw, header, secret, 300, at * 1000), expected, `${name} (a string)`);
  }
});

t.test('the Node example as a pasted block still runs on its own', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-docs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'verify.mjs');
  writeFileSync(file, block('js', '// verify-signature.mjs:'));
  const { verifySignature } = (await import(pathToFileURL(file).href)) as NodeVerifier;
  for (const [name, raw, header, at, expected] of cases) {
    t.equal(verifySignature(Buffer.from(raw), header, secret, 300, at * 1000), expected, name);
  }
});

const hasPython = spawnSync('python3', ['--version']).status === 0;

t.test(
  'the Python example, standard library only',
  { skip: hasPython ? false : 'python3 is not installed' },
  async (t) => {
    const script = `${block('python', 'def verify_signature')}
import json, sys
results = []
for raw, header, now in json.load(sys.stdin):
    results.append(verify_signature(raw.encode("utf-8"), header, ${JSON.stringify(secret)}, now=now))
print(json.dumps(results))
`;
    const run = spawnSync('python3', ['-c', script], {
      input: JSON.stringify(cases.map(([, raw, header, at]) => [raw, header, at])),
      encoding: 'utf8',
    });
    t.equal(run.status, 0, run.stderr);
    t.same(
      JSON.parse(run.stdout),
      cases.map(([, , , , expected]) => expected),
    );
  },
);
