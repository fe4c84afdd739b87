import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { CLI_ENTRY, REPO_ROOT } from '../helpers/cli.js';

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
const build = JSON.parse(readFileSync(join(REPO_ROOT, 'dist', 'build-info.json'), 'utf8')) as {
  commit: string | null;
  dirty: boolean;
};
const svc = (...args: string[]) =>
  spawnSync(process.execPath, [CLI_ENTRY, ...args], { cwd: REPO_ROOT, encoding: 'utf8', timeout: 60_000 });

t.test('svc --version names the version and the commit it was built from', async (t) => {
  const text = svc('--version');
  t.equal(text.status, 0);
  const commit = build.commit
    ? `commit ${build.commit}${build.dirty ? ', with uncommitted changes' : ''}`
    : 'commit unknown';
  t.equal(
    text.stdout,
    `svc ${pkg.version} (${commit}); node ${process.version}, ${process.platform}-${process.arch}\n`,
  );
  t.equal(svc('-v').stdout, text.stdout, '-v says the same');
  const json = svc('--version', '--json');
  t.match(JSON.parse(json.stdout), {
    version: pkg.version,
    commit: build.commit,
    dirty: build.dirty,
    node: process.version,
    builtAt: String,
  });
});

t.test('the version is semantic, and CHANGELOG.md has it with upgrade notes', async (t) => {
  t.match(pkg.version, /^\d+\.\d+\.\d+$/, 'MAJOR.MINOR.PATCH');
  const changelog = readFileSync(join(REPO_ROOT, 'CHANGELOG.md'), 'utf8');
  const headings = [...changelog.matchAll(/^## \[(\d+\.\d+\.\d+)\] — (\d{4}-\d{2}-\d{2})$/gm)];
  t.ok(headings.length > 0, 'versions are headed `## [X.Y.Z] — YYYY-MM-DD`');
  t.equal(headings[0]?.[1], pkg.version, "the newest entry is package.json's version");
  const versions = headings.map((heading) => heading[1]!);
  const newestFirst = [...versions].sort((a, b) => {
    const [x, y] = [a, b].map((v) => v.split('.').map(Number));
    for (let i = 0; i < 3; i++) if (x![i] !== y![i]) return y![i]! - x![i]!;
    return 0;
  });
  t.same(versions, newestFirst, 'newest first, each once');
  t.equal(new Set(versions).size, versions.length);
  const sections = changelog.split(/^## \[/m).slice(1);
  for (const section of sections) {
    const version = section.slice(0, section.indexOf(']'));
    t.match(section, /^### Upgrade notes$/m, `${version} has upgrade notes`);
  }
});

t.test("the README's figures were measured on this version", async (t) => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('### How long it takes'));
  const measured =
    /^Measured on svc (\d+\.\d+\.\d+) \(commit [0-9a-f]{12}\) on \d{4}-\d{2}-\d{2} with `npm run bench:figures`/m.exec(
      section,
    );
  t.ok(measured, 'the section says which build and how (npm run bench:figures)');
  t.equal(measured?.[1], pkg.version, 'a release re-measures install and upgrade times');
  for (const step of ['`install.sh`, whole', '`svc upgrade`, whole', 'the API down during the upgrade'])
    t.match(
      section,
      new RegExp(`\\| ${step.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[^|]*\\| \\d+(\\.\\d)? s`),
      step,
    );
});
