import fc from 'fast-check';

/**
 * fast-check arbitraries derived from the OpenAPI document: valid values for a parameter or body schema,
 * values that break it, and the hostile strings and shapes abusive clients send. The fuzzer in
 * test/api/fuzz.test.ts combines them into whole requests; nothing here knows about a particular route.
 */

export type JsonSchema = Record<string, unknown>;

export interface DocParameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  schema: JsonSchema;
}

export interface DocOperation {
  method: string;
  /** OpenAPI template, e.g. `/v1/links/{linkId}`. */
  path: string;
  operationId: string;
  /** Credential kinds from `x-credentials`; `none` for public routes. */
  credentials: string[] | 'none';
  parameters: DocParameter[];
  body: JsonSchema | null;
  /** `requestBody.required`: whether a request without a body breaks the document. */
  bodyRequired: boolean;
}

interface OpenApiDocument {
  paths: Record<string, Record<string, Record<string, unknown>>>;
  components: { schemas: Record<string, JsonSchema> };
}

export function operationsOf(doc: OpenApiDocument): DocOperation[] {
  const operations: DocOperation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const requestBody = operation.requestBody as
        { required?: boolean; content: Record<string, { schema: JsonSchema }> } | undefined;
      operations.push({
        method: method.toUpperCase(),
        path,
        operationId: operation.operationId as string,
        credentials: (operation['x-credentials'] as string[] | undefined) ?? 'none',
        parameters: (operation.parameters as DocParameter[] | undefined) ?? [],
        body: requestBody?.content['application/json']?.schema ?? null,
        bodyRequired: requestBody?.required === true,
      });
    }
  }
  return operations;
}

/**
 * A reference to one of the ids the tenant (or another organisation) really has, resolved when the request
 * is sent: the pools grow and shrink as the fuzzer creates and deletes resources, and an index keeps the
 * generated case reproducible from its seed.
 */
export class PoolRef {
  constructor(
    readonly owner: 'own' | 'live' | 'other',
    readonly prefix: string,
    readonly index: number,
  ) {}
  [fc.toStringMethod](): string {
    return `PoolRef(${this.owner}:${this.prefix}#${this.index})`;
  }
}

/**
 * JSON nested `depth` levels deep. `JSON.stringify` overflows the stack at about 10,000 levels, so the
 * request text is written out by `toJsonText` rather than by the engine.
 */
export class DeepNesting {
  constructor(readonly depth: number) {}
  text(): string {
    return '['.repeat(this.depth) + ']'.repeat(this.depth);
  }
  [fc.toStringMethod](): string {
    return `DeepNesting(${this.depth})`;
  }
}

/** A value serialised as JSON, with `DeepNesting` markers written out. */
export function toJsonText(value: unknown): string {
  const deep: DeepNesting[] = [];
  const text = JSON.stringify(value, (_key, item: unknown) => {
    if (item instanceof DeepNesting) {
      deep.push(item);
      return `<deep-nesting-${deep.length - 1}>`;
    }
    return item;
  });
  return deep.reduce((out, item, index) => out.replace(`"<deep-nesting-${index}>"`, () => item.text()), text);
}

/**
 * The same value with pool references resolved, and deep nesting kept for `toJsonText` or (`flatten`)
 * replaced by a shallow value of the same JSON type, for schema checks.
 */
export function withoutMarkers(
  value: unknown,
  resolve: (ref: PoolRef) => string,
  deep: 'keep' | 'flatten' = 'flatten',
): unknown {
  if (value instanceof PoolRef) return resolve(value);
  if (value instanceof DeepNesting) return deep === 'keep' ? value : [[]];
  if (Array.isArray(value)) return value.map((item) => withoutMarkers(item, resolve, deep));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      // defineProperty keeps a `__proto__` key an own property, as JSON.parse makes it on the server.
      Object.defineProperty(out, key, {
        value: withoutMarkers(item, resolve, deep),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}

/** The id prefix a pattern like `^link_[0-9a-f]{16}$` demands, or null. */
export function idPrefix(schema: JsonSchema): string | null {
  const pattern = schema.pattern;
  if (typeof pattern !== 'string') return null;
  return /^\^([a-z]{2,4}_)/.exec(pattern)?.[1] ?? null;
}

/** Realistic values for a field by name, so that valid requests get past business rules into the logic. */
export type Hints = (name: string, schema: JsonSchema) => fc.Arbitrary<unknown> | undefined;

export interface SchemaContext {
  components: Record<string, JsonSchema>;
  hints: Hints;
}

function resolve(schema: JsonSchema, context: SchemaContext): JsonSchema {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return schema;
  const name = ref.replace('#/components/schemas/', '');
  const target = context.components[name];
  if (!target) throw new Error(`unresolved ${ref}`);
  return resolve(target, context);
}

/** Strings people and attackers type: unicode of every plane, lone surrogates, NUL, control bytes, SQL. */
export function hostileString(maxLength = 64): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.string({ maxLength }) },
    { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength }) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength }) },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        '',
        ' ',
        '\u0000',
        'a\u0000b',
        '\ud800',
        '\udfff\ud800',
        '\u202e\u0000\ufeff',
        "' OR 1=1 --",
        '"; drop table links; --',
        '%',
        '%00',
        '%ff',
        '../../etc/passwd',
        '..',
        '.',
        '${jndi:ldap://x}',
        '__proto__',
        'constructor',
        '{{7*7}}',
        '<script>alert(1)</script>',
        'null',
        'undefined',
        'NaN',
        '-0',
        '1e400',
        '9'.repeat(400),
        '😀'.repeat(30),
        'ｌｉｎｋ＿',
        'Ω≈ç√∫',
        'link_' + '0'.repeat(16),
        'link_' + 'A'.repeat(16),
        'link_' + '0'.repeat(17),
      ),
    },
    { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 200_000 }).map((n) => 'x'.repeat(n)) },
  );
}

/** Any JSON value, shallow or not. */
export function anyJson(): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
    { weight: 2, arbitrary: hostileString() },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        null,
        true,
        false,
        0,
        -1,
        1.5,
        -0,
        Number.MAX_SAFE_INTEGER + 2,
        -Number.MAX_SAFE_INTEGER - 2,
        1e308,
        -1e308,
        5e-324,
        2 ** 31,
        2 ** 63,
        [],
        {},
        [null],
      ),
    },
    { weight: 1, arbitrary: fc.integer({ min: 2, max: 50_000 }).map((depth) => new DeepNesting(depth)) },
  );
}

/** Values that satisfy `schema` (hints first, where a field has them). */
export function validValue(schema: JsonSchema, context: SchemaContext, name = ''): fc.Arbitrary<unknown> {
  schema = resolve(schema, context);
  const hinted = name ? context.hints(name, schema) : undefined;
  if (hinted) return hinted;
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if (Array.isArray(schema.type)) {
    return fc.oneof(
      ...(schema.type as string[]).map((type) => validValue({ ...schema, type }, context, name)),
    );
  }
  switch (schema.type) {
    case 'string':
      return validString(schema);
    case 'integer':
      return fc.integer({
        min: (schema.minimum as number | undefined) ?? -1_000_000,
        max: (schema.maximum as number | undefined) ?? 1_000_000,
      });
    case 'number':
      return fc.double({
        noNaN: true,
        noDefaultInfinity: true,
        min: (schema.minimum as number | undefined) ?? -1e6,
        max: (schema.maximum as number | undefined) ?? 1e6,
      });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const minLength = (schema.minItems as number | undefined) ?? 0;
      return fc.array(validValue((schema.items as JsonSchema) ?? {}, context, name), {
        minLength,
        maxLength: Math.min((schema.maxItems as number | undefined) ?? 4, minLength + 4),
      });
    }
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
      const required = (schema.required ?? []) as string[];
      // An optional field is left out two times in three: fields often constrain each other (a widget
      // token's link_id wants intent reconnect), and fewer of them make more requests valid as a whole.
      const absent = Symbol('absent');
      const record = fc
        .record(
          Object.fromEntries(
            Object.entries(properties).map(([key, sub]) => {
              const value = validValue(sub, context, key);
              return [
                key,
                required.includes(key)
                  ? value
                  : fc.oneof({ weight: 2, arbitrary: fc.constant(absent) }, { weight: 1, arbitrary: value }),
              ];
            }),
          ),
        )
        .map((value) => Object.fromEntries(Object.entries(value).filter(([, item]) => item !== absent)));
      const minProperties = (schema.minProperties as number | undefined) ?? 0;
      return minProperties ? record.filter((value) => Object.keys(value).length >= minProperties) : record;
    }
    default:
      return anyJson();
  }
}

function validString(schema: JsonSchema): fc.Arbitrary<string> {
  const minLength = (schema.minLength as number | undefined) ?? 0;
  const maxLength = (schema.maxLength as number | undefined) ?? 64;
  if (schema.format === 'date-time') {
    return fc
      .date({ min: new Date(Date.UTC(1970, 0, 1)), max: new Date(Date.UTC(2100, 0, 1)), noInvalidDate: true })
      .map((date) => date.toISOString());
  }
  if (typeof schema.pattern === 'string') {
    return fc
      .stringMatching(new RegExp(schema.pattern))
      .filter((text) => text.length >= minLength && text.length <= maxLength);
  }
  return fc.oneof(
    fc.string({ minLength, maxLength: Math.min(maxLength, minLength + 40) }),
    fc.string({ unit: 'grapheme', minLength, maxLength: Math.min(maxLength, minLength + 20) }),
  );
}

/** A value that probably breaks `schema` (the fuzzer checks with the document which ones really do). */
export function invalidValue(schema: JsonSchema, context: SchemaContext): fc.Arbitrary<unknown> {
  schema = resolve(schema, context);
  const wrongType = anyJson();
  const specific: fc.Arbitrary<unknown>[] = [];
  if (Array.isArray(schema.enum)) specific.push(hostileString(), fc.constant(String(schema.enum[0]) + ' '));
  const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
  if (types.includes('string')) {
    const maxLength = schema.maxLength as number | undefined;
    if (maxLength !== undefined) specific.push(fc.constant('x'.repeat(maxLength + 1)));
    if (schema.minLength) specific.push(fc.constant(''));
    if (schema.pattern) {
      const pattern = new RegExp(schema.pattern as string);
      specific.push(hostileString().filter((text) => !pattern.test(text)));
      specific.push(validString(schema).map((text) => text.toUpperCase() + 'Z'));
    }
    if (schema.format === 'date-time')
      specific.push(
        fc.constantFrom('2026-02-30T00:00:00Z', '2026-06-15', 'yesterday', '2026-06-15T25:00:00Z'),
      );
  }
  if (types.includes('integer') || types.includes('number')) {
    const minimum = schema.minimum as number | undefined;
    const maximum = schema.maximum as number | undefined;
    if (minimum !== undefined) specific.push(fc.constant(minimum - 1), fc.constant(-1e308));
    if (maximum !== undefined) specific.push(fc.constant(maximum + 1), fc.constant(1e308));
    if (types.includes('integer')) specific.push(fc.constantFrom(1.5, 0.1, -0.5));
    specific.push(fc.constantFrom('1', '1e3', true));
  }
  if (types.includes('boolean')) specific.push(fc.constantFrom('true', 0, 1, 'yes'));
  if (types.includes('array')) {
    const maxItems = schema.maxItems as number | undefined;
    if (maxItems !== undefined) {
      const item = validValue((schema.items as JsonSchema) ?? {}, context);
      specific.push(fc.array(item, { minLength: maxItems + 1, maxLength: maxItems + 3 }));
    }
    if (schema.minItems) specific.push(fc.constant([]));
    specific.push(fc.array(anyJson(), { minLength: 1, maxLength: 3 }));
  }
  if (types.includes('object')) specific.push(mutatedValue(schema, context));
  return specific.length ? fc.oneof({ weight: 1, arbitrary: wrongType }, ...specific) : wrongType;
}

/** A valid value of an object schema with one thing broken: a field dropped, added, nulled or replaced. */
export function mutatedValue(schema: JsonSchema, context: SchemaContext): fc.Arbitrary<unknown> {
  schema = resolve(schema, context);
  if (schema.type !== 'object') return invalidValue(schema, context);
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = (schema.required ?? []) as string[];
  const names = Object.keys(properties);
  return (validValue(schema, context) as fc.Arbitrary<Record<string, unknown>>).chain((valid) => {
    const mutations: fc.Arbitrary<unknown>[] = [
      anyJson(),
      fc
        .tuple(
          fc.oneof(hostileString(24), fc.constantFrom('__proto__', 'constructor', 'prototype')),
          anyJson(),
        )
        .map(([key, value]) => withProperty(valid, key, value)),
    ];
    if (required.length)
      mutations.push(fc.constantFrom(...required).map((key) => withoutProperty(valid, key)));
    if (names.length) {
      const key = fc.constantFrom(...names);
      mutations.push(
        key.chain((name) =>
          invalidValue(properties[name]!, context).map((v) => withProperty(valid, name, v)),
        ),
        key.map((name) => withProperty(valid, name, null)),
        key.chain((name) => hostileString().map((v) => withProperty(valid, name, v))),
        key.chain((name) =>
          fc
            .integer({ min: 100, max: 50_000 })
            .map((depth) => withProperty(valid, name, new DeepNesting(depth))),
        ),
      );
    }
    return fc.oneof(...mutations);
  });
}

function withProperty(value: Record<string, unknown>, key: string, item: unknown): Record<string, unknown> {
  const out = { ...value };
  Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
  return out;
}

function withoutProperty(value: Record<string, unknown>, key: string): Record<string, unknown> {
  const out = { ...value };
  delete out[key];
  return out;
}

/** A value as a query string or path segment carries it. */
export function asText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value instanceof DeepNesting) return value.text();
  if (value === null || typeof value !== 'object') return String(value);
  return JSON.stringify(value);
}

/**
 * Raw URL text a careless or hostile client puts in a path or query: broken percent escapes and escapes
 * that decode to invalid UTF-8 (an overlong `/`, a lone surrogate, a bare continuation byte).
 */
export const RAW_URL_JUNK = [
  '%',
  '%zz',
  '%E0%A4%A',
  '%FF',
  '%C0%AF',
  '%ED%A0%80',
  '%80',
  '%00',
  '%F4%90%80%80',
  '%25',
  '%2F',
  '%2e%2e',
] as const;

/** Header values fetch can carry: Latin-1 bytes without CR, LF or NUL, no edge spaces. */
export function headerValue(maxLength = 80): fc.Arbitrary<string> {
  return fc
    .string({
      unit: fc
        .integer({ min: 0x20, max: 0xff })
        .filter((code) => code < 0x7f || code > 0x9f)
        .map((c) => String.fromCharCode(c)),
      minLength: 1,
      maxLength,
    })
    .map((text) => text.trim())
    .filter((text) => text.length > 0);
}

/** Content types a careless client sends with a JSON body, and some it sends instead. */
export const ODD_CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
  'application/json; charset=bogus',
  'application/json; charset=utf-16',
  'application/vnd.api+json',
  'APPLICATION/JSON',
  'application/json, text/plain',
  '*/*',
  'json',
];

/** Request bodies no JSON serialiser writes: broken, hostile, or not UTF-8. */
export function rawBodies(): fc.Arbitrary<string | Uint8Array> {
  const invalidUtf8 = fc
    .constantFrom([0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0x80], [0xf4, 0x90, 0x80, 0x80], [0xe0, 0xa4])
    .map((bytes) => Buffer.concat([Buffer.from('{"description":"'), Buffer.from(bytes), Buffer.from('"}')]));
  return fc.oneof(
    fc.constantFrom(
      '',
      '{',
      '{"a":',
      'null',
      'true',
      '0',
      '""',
      '[]',
      '{}',
      '\ufeff{}',
      '{"a":1,"a":2}',
      '{"__proto__":{"polluted":true}}',
      '{"constructor":{"prototype":{"polluted":true}}}',
      "{'a':1}",
      '{"a":NaN}',
      '{"a":1e400}',
      '{"a":-0}',
      '{"a":"\\ud800"}',
      '{"a":"\\u0000"}',
      '{"a":1}garbage',
      ' \t\r\n{}',
    ),
    fc.integer({ min: 1_000, max: 200_000 }).map((depth) => '['.repeat(depth)),
    fc.integer({ min: 1_000, max: 100_000 }).map((depth) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)),
    hostileString(),
    invalidUtf8,
  );
}

/** Percent-encodes UTF-8 bytes as a client library would (a lone surrogate becomes U+FFFD first). */
export function encodeText(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const char = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
