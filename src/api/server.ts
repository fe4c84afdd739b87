import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from './app.js';
import type { AnyRoute } from './route.js';
import type { AppServices } from './services.js';

export interface ApiServer {
  server: Server;
  url: string;
  /** Stops accepting, lets in-flight requests finish (up to `timeoutMs`), then cuts what remains. */
  close(timeoutMs?: number): Promise<void>;
}

export async function startApiServer(
  services: AppServices,
  host: string,
  port: number,
  extraRoutes: AnyRoute[] = [],
): Promise<ApiServer> {
  const app = createApp(services, extraRoutes);
  const server = createServer(
    { requestTimeout: services.config.api.requestTimeoutMs, headersTimeout: 10_000, keepAliveTimeout: 5_000 },
    app.callback(),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    server,
    url: `http://${shownHost}:${address.port}`,
    close: (timeoutMs = 30_000) =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => server.closeAllConnections(), timeoutMs);
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
