/*
 * The names `svc install` gives what it makes for a new appliance. They are data (an operator may rename
 * the organisation and the keys), but words the software chose rather than a person: the console shows
 * them in the reader's language while they are unchanged (console/format.ts).
 */
export const DEFAULT_ORGANISATION_NAME = 'Default organisation';
export const DEFAULT_SECRET_KEY_NAME = 'Default test secret key';
export const DEFAULT_PUBLISHABLE_KEY_NAME = 'Default test publishable key';
