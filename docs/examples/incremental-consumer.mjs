#!/usr/bin/env node
// Keeps a local copy of a link's movements up to date, as docs/incremental-sync.md describes.
// Node 20+, no dependencies. Run it as often as you like; each run fetches only what changed.
//
//   SVC_BASE_URL=http://127.0.0.1:8080 SVC_SECRET_KEY=svc_sk_test_… node incremental-consumer.mjs link_… copy.json
//
// The copy file holds { cursors: { <account id>: <largest synced_at read> }, movements: { <id>: movement } }.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

const [linkId, copyFile = 'movements-copy.json'] = process.argv.slice(2);
const base = process.env.SVC_BASE_URL ?? 'http://127.0.0.1:8080';
const key = process.env.SVC_SECRET_KEY;
if (!linkId || !key) {
  console.error('usage: SVC_SECRET_KEY=… node incremental-consumer.mjs LINK_ID [COPY_FILE]');
  process.exit(64);
}

const copy = existsSync(copyFile)
  ? JSON.parse(readFileSync(copyFile, 'utf8'))
  : { cursors: {}, movements: {} };

/** GET with the key; waits out a 429 as the API asks (Retry-After), and fails loudly on anything else. */
async function get(url) {
  for (;;) {
    const response = await fetch(url, { headers: { authorization: `Bearer ${key}` } });
    if (response.status === 429) {
      await new Promise((resolve) =>
        setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1000),
      );
      continue;
    }
    if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
    return response;
  }
}

/** The `next` URL of an RFC 5988 Link header, if there is one. */
function nextLink(header) {
  const match = /<([^>]+)>;\s*rel="next"/.exec(header ?? '');
  return match ? match[1] : null;
}

// Every account of the link, the removed ones too: their movements stay readable.
const accounts = [];
for (let url = `${base}/v1/accounts?link_id=${linkId}&include_removed=true&per_page=300`; url;) {
  const response = await get(url);
  accounts.push(...(await response.json()));
  url = nextLink(response.headers.get('link'));
}

let upserted = 0;
let removed = 0;
for (const account of accounts) {
  // The first run starts from the beginning of time; later runs from the saved cursor.
  let cursor = copy.cursors[account.id] ?? '1970-01-01T00:00:00.000Z';
  const query = new URLSearchParams({
    synced_since: cursor,
    include_removals: 'true',
    confirmed_only: 'false',
    per_page: '300',
  });
  for (let url = `${base}/v1/accounts/${account.id}/movements?${query}`; url;) {
    const response = await get(url);
    for (const movement of await response.json()) {
      if (movement.status === 'normal') {
        copy.movements[movement.id] = movement; // new, changed, or a pending row that posted (same id)
        upserted += 1;
      } else if (copy.movements[movement.id]) {
        delete copy.movements[movement.id]; // duplicated (see canonical_id) or reversed: not a real movement
        removed += 1;
      }
      if (movement.synced_at > cursor) cursor = movement.synced_at;
    }
    url = nextLink(response.headers.get('link'));
  }
  copy.cursors[account.id] = cursor;
}

// Write the copy and its cursors together, atomically: a crash leaves the previous run's state.
writeFileSync(`${copyFile}.tmp`, JSON.stringify(copy, null, 2));
renameSync(`${copyFile}.tmp`, copyFile);
console.log(
  JSON.stringify({
    accounts: accounts.length,
    upserted,
    removed,
    movements: Object.keys(copy.movements).length,
  }),
);
