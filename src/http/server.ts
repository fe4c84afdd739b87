import { createApp } from './app.js';
import { listenForApi, type ApiListener } from './listener.js';
import type { AnyRoute } from '../api/route.js';
import type { AppServices } from '../api/services.js';

export type ApiServer = Omit<ApiListener, 'serve'>;

/**
 * Serves the API on `listener` (bound early by the api process, so a taken port fails fast), or on a new
 * listener at `host` and `port`.
 */
export async function startApiServer(
  services: AppServices,
  at: ApiListener | { host: string; port: number },
  extraRoutes: AnyRoute[] = [],
): Promise<ApiServer> {
  const listener = 'serve' in at ? at : await listenForApi({ ...services.config.api, ...at });
  listener.server.on('clientError', (error: NodeJS.ErrnoException) =>
    services.logger.debug({ code: error.code }, 'client error before the request reached the app'),
  );
  listener.serve(createApp(services, extraRoutes).callback());
  return listener;
}
