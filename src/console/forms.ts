import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import { compileChecker, type SchemaIssue } from '../api/validation.js';
import { errors } from '../errors/api-error.js';

/*
 * A console form is read with the API's own schema for the same change: the page turns its fields into the
 * API's body (`decode`), the schema decides, and the value comes out typed from the schema. Only the words
 * are the console's: `wording` says a problem in the reader's language (the API's messages are English).
 */

export type FormWording = (issue: SchemaIssue) => string;

export function formReader<const S extends JSONSchema>(schema: S) {
  const check = compileChecker(schema as Record<string, unknown>);
  return (value: unknown, wording: FormWording): FromSchema<S> => {
    const issue = check(value);
    if (!issue) return value as FromSchema<S>;
    const message = wording(issue);
    throw issue.keyword === 'required'
      ? errors.missingParameter(issue.param, message)
      : errors.invalidParameter(issue.param || 'form', message);
  };
}

/** The property a problem is about, without an item's index (`enabled_events.3` is `enabled_events`). */
export const fieldOf = (issue: SchemaIssue): string => issue.param.split('.')[0] ?? '';
