import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { Test } from 'tap';
import { allRoutes } from '../../src/http/catalogue.js';
import type { AnyRoute, JsonSchema } from '../../src/api/route.js';
import { createApiKey, revokeApiKey } from '../../src/keys/keys.js';
import {
  appWithTenants,
  forEachEngine,
  linkBody,
  RAISED_LIMITS,
  runSyncs,
  tableCounts,
  type TestApp,
  type TestResponse,
  type TestTenant,
} from '../helpers/harness.js';
import { connectThroughWidget } from '../helpers/widget.js';

/*
 * Tenant isolation, derived from the route catalogue rather than a hand-kept list: every route that takes a
 * resource id (in its path, or as a required body field) is called on organisation A's test-mode resource
 * with every credential that must not reach it, and every paginated list is read by outsiders. A route
 * added later is covered as soon as it is in the catalogue; one whose id prefix has no fixture here fails.
 */

/** `^link_[0-9a-f]{16}$` → `link`: a parameter is a resource id when its pattern starts with a prefix. */
function idPrefixOf(schema: JsonSchema | undefined): string | null {
  const pattern = schema?.pattern;
  if (typeof pattern !== 'string') return null;
  return /^\^([a-z]+)_/.exec(pattern)?.[1] ?? null;
}

function properties(schema: JsonSchema | undefined): Record<string, JsonSchema> {
  return (schema?.properties ?? {}) as Record<string, JsonSchema>;
}

interface IdField {
  name: string;
  prefix: string;
}

function pathIds(route: AnyRoute): IdField[] {
  const names = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  return names.map((name) => {
    const prefix = idPrefixOf(properties(route.params)[name]);
    if (!prefix) throw new Error(`${route.path}: path parameter ${name} has no id pattern`);
    return { name, prefix };
  });
}

function requiredBodyIds(route: AnyRoute): IdField[] {
  const required = (route.body?.required ?? []) as string[];
  return required
    .map((name) => ({ name, prefix: idPrefixOf(properties(route.body)[name]) }))
    .filter((field): field is IdField => field.prefix !== null);
}

function queryIds(route: AnyRoute): IdField[] {
  return Object.entries(properties(route.query))
    .map(([name, schema]) => ({ name, prefix: idPrefixOf(schema) }))
    .filter((field): field is IdField => field.prefix !== null);
}

/** Values a schema cannot say; keyed by operationId. Ids are never listed here: they come from fixtures. */
const BODY_HINTS: Record<string, Record<string, unknown>> = {
  fireSandboxEvent: { type: 'link.refreshed' },
};

/**
 * The smallest body the schema accepts: required fields only (plus the simplest optional ones when
 * `minProperties` asks for more), ids taken from `ids` by their prefix.
 */
function exampleOf(schema: JsonSchema, ids: Record<string, string>): unknown {
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const prefix = idPrefixOf(schema);
  if (prefix) {
    if (!ids[prefix]) throw new Error(`no fixture for id prefix ${prefix}_`);
    return ids[prefix];
  }
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'object': {
      const props = properties(schema);
      const chosen = new Set((schema.required ?? []) as string[]);
      // Booleans first: they are valid whatever the handler checks beyond the schema (a URL, an event type).
      const rank = (s: JsonSchema) => (s.type === 'boolean' ? 0 : Array.isArray(s.enum) ? 1 : 2);
      const optional = Object.keys(props)
        .filter((name) => !chosen.has(name))
        .sort((a, b) => rank(props[a]!) - rank(props[b]!));
      while (chosen.size < Number(schema.minProperties ?? 0) && optional.length > 0)
        chosen.add(optional.shift()!);
      return Object.fromEntries([...chosen].map((name) => [name, exampleOf(props[name]!, ids)]));
    }
    case 'integer':
    case 'number':
      return Number(schema.minimum ?? 1);
    case 'boolean':
      return false;
    case 'array':
      return Array.from({ length: Number(schema.minItems ?? 0) }, () =>
        exampleOf((schema.items ?? {}) as JsonSchema, ids),
      );
    default:
      return 'x'.repeat(Number(schema.minLength ?? 1));
  }
}

interface Call {
  method: string;
  path: string;
  body?: unknown;
}

function callFor(route: AnyRoute, ids: Record<string, string>): Call {
  const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const prefix = idPrefixOf(properties(route.params)[name])!;
    if (!ids[prefix]) throw new Error(`${route.path}: no fixture for id prefix ${prefix}_`);
    return ids[prefix]!;
  });
  const body = route.body
    ? { ...(exampleOf(route.body, ids) as object), ...(BODY_HINTS[route.operationId] ?? {}) }
    : undefined;
  return { method: route.method.toUpperCase(), path, body };
}

/** An id of the same shape as `id` that names nothing: its characters after the prefix, reversed. */
function stranger(id: string): string {
  const cut = id.indexOf('_') + 1;
  const reversed = id.slice(0, cut) + [...id.slice(cut)].reverse().join('');
  return reversed === id ? id.slice(0, cut) + 'f'.repeat(id.length - cut) : reversed;
}

/** The error body without its request id, with the ids the caller sent blanked out. */
function comparable(response: TestResponse, sent: Record<string, string>): string {
  const { request_id: _requestId, ...error } = response.body?.error ?? {};
  return Object.values(sent).reduce((text, id) => text.split(id).join('<id>'), JSON.stringify(error));
}

const ID_ROUTES = allRoutes.filter((route) => pathIds(route).length > 0 || requiredBodyIds(route).length > 0);
const LIST_ROUTES = allRoutes.filter(
  (route) =>
    route.method === 'get' &&
    pathIds(route).length === 0 &&
    (route.responses[200]?.headers ?? []).includes('pagination'),
);
/** Lists of shared reference data, not of anybody's resources. */
const GLOBAL_LISTS = new Set(['/v1/institutions']);

interface Outsider {
  label: string;
  key: string;
  expected: { status: number; type: string; code: string };
}

forEachEngine(t, async (t, engine) => {
  // No key cache: a revoked key is refused on its next request. Private addresses: a live endpoint on 127.0.0.1.
  const {
    app,
    tenant: a,
    other: b,
  } = await appWithTenants(t, engine, {
    config: { auth: { cacheSeconds: 0 }, webhooks: { allowPrivateAddresses: true } },
  });
  const marker = `iso-a-${randomBytes(6).toString('hex')}`;
  const ask = (key: string, call: Call) =>
    app.request(call.method, call.path, { key, ...(call.body !== undefined ? { body: call.body } : {}) });
  const must = async (response: Promise<TestResponse>, what: string) => {
    const answered = await response;
    if (answered.status >= 300) throw new Error(`${what}: ${answered.status} ${answered.text}`);
    return answered.body;
  };

  // Organisation A, test mode: one of every resource, plus a live endpoint that must hear nothing of it.
  const skA = a.keys.sk_test.secret;
  const endpointA = await must(
    app.request('POST', '/v1/webhook_endpoints', {
      key: skA,
      body: { url: `http://127.0.0.1:9/${marker}`, enabled_events: ['*'], description: marker },
    }),
    'endpoint A',
  );
  const liveEndpointA = await must(
    app.request('POST', '/v1/webhook_endpoints', {
      key: a.keys.sk_live.secret,
      body: { url: 'http://127.0.0.1:9/live', enabled_events: ['*'] },
    }),
    'live endpoint A',
  );
  const linkA = await must(
    app.request('POST', '/v1/links', {
      key: skA,
      body: linkBody({
        bank_id: 'bci',
        holder_type: 'business',
        credentials: { rut: '11.111.111-1', password: 'sandbox', rut_empresa: '76.086.428-5' },
        external_user_id: marker,
      }),
    }),
    'link A',
  );
  const mfaLinkA = await must(
    app.request('POST', '/v1/links', {
      key: skA,
      body: linkBody({ external_user_id: marker }, 'sandbox-mfa'),
    }),
    'MFA link A',
  );
  await runSyncs(app);
  app.clock.advance((app.config.refresh.onlyLastCooldownMinutes + 1) * 60_000);
  const intentA = await must(
    app.request('POST', '/v1/refresh_intents', { key: skA, body: { link_id: mfaLinkA.id } }),
    'intent A',
  );
  await runSyncs(app);
  const { exchangeToken } = await connectThroughWidget(app as TestApp, skA);
  const [accountA] = await must(
    app.request('GET', `/v1/accounts?link_id=${linkA.id}`, { key: skA }),
    'accounts',
  );
  const [eventA] = await must(app.request('GET', '/v1/events', { key: skA }), 'events');
  const [deliveryA] = await must(app.request('GET', '/v1/webhook_deliveries', { key: skA }), 'deliveries');
  const idsA: Record<string, string> = {
    link: linkA.id,
    acc: accountA.id,
    ri: intentA.id,
    et: exchangeToken,
    evt: eventA.id,
    we: endpointA.id,
    wd: deliveryA.id,
  };

  // Organisation B, test mode: resources of its own, so that its lists and counts are not trivially empty.
  const skB = b.keys.sk_test.secret;
  const endpointB = await must(
    app.request('POST', '/v1/webhook_endpoints', {
      key: skB,
      body: { url: 'http://127.0.0.1:9/b', enabled_events: ['*'] },
    }),
    'endpoint B',
  );
  const linkB = await must(app.request('POST', '/v1/links', { key: skB, body: linkBody() }), 'link B');
  await runSyncs(app);
  const [eventB] = await must(app.request('GET', '/v1/events', { key: skB }), 'events B');
  const [deliveryB] = await must(app.request('GET', '/v1/webhook_deliveries', { key: skB }), 'deliveries B');
  const idsB: Record<string, string> = { link: linkB.id, evt: eventB.id, we: endpointB.id, wd: deliveryB.id };

  // A key of A's that worked and was then revoked.
  const revoked = await app.db.transaction((trx) =>
    createApiKey(trx, {
      brand: app.config.brand,
      orgId: a.orgId,
      mode: 'test',
      type: 'secret',
      actor: 'test',
      now: app.clock.now(),
      rateLimits: RAISED_LIMITS,
    }),
  );
  await must(app.request('GET', `/v1/links/${linkA.id}`, { key: revoked.secret }), 'revoked key, before');
  await app.db.transaction((trx) =>
    revokeApiKey(trx, { keyId: revoked.key.id, actor: 'test', now: app.clock.now() }),
  );

  /** Everything of A's (test mode) an outsider must never see: every row id, the org id and the marker. */
  const secretsOfA = async (): Promise<string[]> => {
    const found = [a.orgId, marker];
    for (const table of [
      'links',
      'accounts',
      'movements',
      'refresh_intents',
      'webhook_endpoints',
      'events',
      'webhook_deliveries',
      'exchange_tokens',
    ]) {
      const rows: { id: string }[] = await app.db
        .knex(table)
        .where({ org_id: a.orgId, mode: 'test' })
        .select('id');
      found.push(...rows.map((row) => row.id));
    }
    return found;
  };
  const leaksOf = (text: string, secrets: string[], allowed: string[] = []) =>
    secrets.filter((secret) => !allowed.includes(secret) && text.includes(secret));

  /** What a rejected request must leave untouched: row counts everywhere, and the rows it could have changed. */
  const snapshot = async () => {
    const rows: Record<string, unknown[]> = {};
    for (const table of [
      'links',
      'accounts',
      'refresh_intents',
      'webhook_endpoints',
      'webhook_deliveries',
      'exchange_tokens',
      'widget_tokens',
      'jobs',
    ])
      rows[table] = await app.db.knex(table).orderBy('id');
    return { counts: await tableCounts(app.db), rows };
  };

  const outsiders = (tenantA: TestTenant, tenantB: TestTenant): Outsider[] => [
    {
      label: "another organisation's secret key",
      key: tenantB.keys.sk_test.secret,
      expected: { status: 404, type: 'invalid_request_error', code: 'resource_missing' },
    },
    {
      label: "the same organisation's live key",
      key: tenantA.keys.sk_live.secret,
      expected: { status: 403, type: 'permission_error', code: 'wrong_mode' },
    },
    {
      label: "the same organisation's publishable key",
      key: tenantA.keys.pk_test.secret,
      expected: { status: 403, type: 'permission_error', code: 'insufficient_scope' },
    },
    {
      label: 'a revoked key of the same organisation',
      key: revoked.secret,
      expected: { status: 401, type: 'authentication_error', code: 'invalid_credential' },
    },
  ];

  t.test('lists, counts and filters show an outsider none of A', async (t: Test) => {
    const secrets = await secretsOfA();
    const listOutsiders = outsiders(a, b).filter(
      (o) => o.expected.status !== 401 && o.expected.code !== 'insufficient_scope',
    );
    t.ok(LIST_ROUTES.length >= 5, `${LIST_ROUTES.length} paginated lists`);
    for (const route of LIST_ROUTES) {
      const filters = queryIds(route);
      const required = filters.filter((f) => ((route.query?.required ?? []) as string[]).includes(f.name));
      if (required.length === 0) {
        const own = await app.request('GET', `${route.path}?per_page=300`, { key: skA });
        t.equal(own.status, 200);
        if (!GLOBAL_LISTS.has(route.path))
          t.ok(
            leaksOf(own.text, secrets).length > 0,
            `${route.path}: A itself sees its rows (there is something to leak)`,
          );
        for (const outsider of listOutsiders) {
          const listed = await app.request('GET', `${route.path}?per_page=300`, { key: outsider.key });
          const label = `${route.path} with ${outsider.label}`;
          t.equal(listed.status, 200, label);
          t.same(leaksOf(listed.text, secrets), [], `${label}: none of A's rows`);
          t.equal(
            Number(listed.headers.get('x-total-count')),
            listed.body.length,
            `${label}: X-Total-Count counts only what the caller may see`,
          );
        }
        const ofB = await app.request('GET', `${route.path}?per_page=300`, { key: skB });
        if (!GLOBAL_LISTS.has(route.path)) t.ok(ofB.body.length > 0, `${route.path}: B sees its own rows`);
      }
      for (const filter of filters) {
        const rest = required.filter((f) => f.name !== filter.name);
        const query = (ids: Record<string, string>) =>
          new URLSearchParams({
            per_page: '300',
            [filter.name]: ids[filter.prefix]!,
            ...Object.fromEntries(rest.map((f) => [f.name, ids[f.prefix]!])),
          }).toString();
        const mine = await app.request('GET', `${route.path}?${query(idsA)}`, { key: skA });
        t.equal(mine.status, 200);
        t.ok(mine.body.length > 0, `${route.path}?${filter.name}=: A's own id finds A's rows`);
        for (const outsider of listOutsiders) {
          const label = `${route.path}?${filter.name}=<A's ${filter.prefix}> with ${outsider.label}`;
          const listed = await app.request('GET', `${route.path}?${query(idsA)}`, { key: outsider.key });
          if (listed.status === 200) {
            t.same(listed.body, [], `${label}: empty`);
            t.equal(listed.headers.get('x-total-count'), '0', `${label}: X-Total-Count 0`);
          } else {
            t.ok([403, 404].includes(listed.status), `${label}: refused (${listed.status})`);
            t.ok(
              ['resource_missing', 'wrong_mode'].includes(listed.body?.error?.code),
              `${label}: ${listed.body?.error?.code}`,
            );
          }
          const filterId = idsA[filter.prefix]!;
          t.same(leaksOf(listed.text, secrets, [filterId]), [], `${label}: nothing of A's but the id sent`);
          if (listed.status === 404) {
            const unknownId = { ...idsA, [filter.prefix]: stranger(filterId) };
            const unknown = await app.request('GET', `${route.path}?${query(unknownId)}`, {
              key: outsider.key,
            });
            t.equal(
              comparable(listed, idsA),
              comparable(unknown, unknownId),
              `${label}: the same answer as for an id that names nothing`,
            );
          }
        }
        if (idsB[filter.prefix]) {
          const ofB = await app.request('GET', `${route.path}?${query(idsB)}`, { key: skB });
          t.equal(ofB.status, 200);
          t.ok(ofB.body.length > 0, `${route.path}?${filter.name}=<B's own>: B's rows`);
          t.same(leaksOf(ofB.text, secrets), [], `${route.path}?${filter.name}=<B's own>: none of A's`);
        }
      }
    }
  });

  t.test("every delivery belongs to its event's organisation and mode", async (t: Test) => {
    const rows: {
      org_id: string;
      mode: string;
      event_org: string;
      event_mode: string;
      endpoint_org: string;
      endpoint_mode: string;
    }[] = await app.db
      .knex('webhook_deliveries as d')
      .join('events as e', 'e.id', 'd.event_id')
      .join('webhook_endpoints as w', 'w.id', 'd.endpoint_id')
      .select(
        'd.org_id',
        'd.mode',
        'e.org_id as event_org',
        'e.mode as event_mode',
        'w.org_id as endpoint_org',
        'w.mode as endpoint_mode',
      );
    t.ok(rows.length > 0, `${rows.length} deliveries`);
    const crossed = rows.filter(
      (r) =>
        r.event_org !== r.endpoint_org ||
        r.event_mode !== r.endpoint_mode ||
        r.org_id !== r.event_org ||
        r.mode !== r.event_mode,
    );
    t.same(crossed, [], "no delivery carries one tenant's event to another's endpoint");
    const toLive = await app.db
      .knex('webhook_deliveries')
      .where({ endpoint_id: liveEndpointA.id })
      .count({ n: '*' });
    t.equal(
      Number((toLive[0] as { n: number | string }).n),
      0,
      "A's live endpoint heard nothing of A's test mode",
    );
  });

  // Last: the owner's control calls at its end delete A's link and endpoint.
  t.test('every route that takes an id refuses every credential but the owner', async (t: Test) => {
    const secrets = await secretsOfA();
    let cells = 0;
    t.ok(ID_ROUTES.length >= 15, `${ID_ROUTES.length} routes take an id`);
    for (const route of ID_ROUTES) {
      const call = callFor(route, idsA);
      const named = [...pathIds(route), ...requiredBodyIds(route)].map((field) => idsA[field.prefix]!);
      for (const outsider of outsiders(a, b)) {
        // A route open to publishable keys is the owner's to call with one; it is not a refusal to test.
        if (
          outsider.expected.code === 'insufficient_scope' &&
          route.auth !== 'none' &&
          route.auth.includes('publishable_key')
        )
          continue;
        const label = `${call.method} ${route.path} with ${outsider.label}`;
        const before = await snapshot();
        const response = await ask(outsider.key, call);
        cells += 1;
        t.equal(response.status, outsider.expected.status, `${label}: ${outsider.expected.status}`, {
          body: response.text,
        });
        t.equal(response.body?.error?.type, outsider.expected.type, `${label}: error.type`);
        t.equal(response.body?.error?.code, outsider.expected.code, `${label}: error.code`);
        t.same(await snapshot(), before, `${label}: nothing was written`);
        // Another organisation learns nothing, not even that the id exists: its answer is the one for an id
        // that names nothing.
        t.same(leaksOf(response.text, secrets, named), [], `${label}: nothing of A's but the id sent`);
        if (outsider.expected.code === 'resource_missing') {
          const unknownIds = Object.fromEntries(
            Object.entries(idsA).map(([prefix, id]) => [prefix, stranger(id)]),
          );
          const unknown = await ask(outsider.key, callFor(route, unknownIds));
          t.equal(
            comparable(response, idsA),
            comparable(unknown, unknownIds),
            `${label}: the same answer as for an id that names nothing`,
          );
        }
      }
    }
    t.comment(`isolation matrix: ${ID_ROUTES.length} routes x 4 credentials = ${cells} refusals checked`);

    // The owner's own key gets through every one of these routes, so the refusals above were not about a
    // wrong id. Deletions last, since they take the fixtures with them.
    const ordered = [...ID_ROUTES].sort(
      (x, y) => Number(x.method === 'delete') - Number(y.method === 'delete'),
    );
    for (const route of ordered) {
      const call = callFor(route, idsA);
      const response = await ask(skA, call);
      t.ok(
        (response.status >= 200 && response.status < 300) || response.status === 409,
        `${call.method} ${route.path} with the owner's key: past the ownership check (${response.status})`,
        { body: response.text },
      );
    }
  });
});
