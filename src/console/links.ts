import type { Config } from '../config/defaults.js';

/** A console page's absolute URL under the configured base URL (what the CLI prints for a person to open). */
export function consoleLink(config: Pick<Config, 'api'>, page: 'accept', token: string): string {
  return `${config.api.baseUrl.replace(/\/+$/, '')}/console/${page}/${encodeURIComponent(token)}`;
}
