import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Test } from 'tap';

/**
 * A real TCP proxy in front of a server (Postgres, in the outage tests), so a test can take "the database"
 * away from the appliance's processes without stopping the machine's shared server: `down()` stops
 * listening and drops every open connection, as a stopped or unreachable database does; `up()` listens
 * again on the same port.
 */
export interface TcpProxy {
  port: number;
  /** Connections open through the proxy now. */
  connections(): number;
  /** Connections accepted since the proxy started. */
  accepted(): number;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(
  t: Test,
  target: { host: string; port: number },
  host = '127.0.0.1',
): Promise<TcpProxy> {
  const open = new Set<Socket>();
  let accepted = 0;
  let server: Server | null = null;
  let port = 0;

  const onConnection = (client: Socket) => {
    accepted += 1;
    const upstream = connect(target.port, target.host);
    open.add(client);
    open.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.pipe(upstream);
    upstream.pipe(client);
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const next = createServer(onConnection);
      next.once('error', reject);
      next.listen(port, host, () => {
        next.off('error', reject);
        server = next;
        const address = next.address();
        port = typeof address === 'object' && address ? address.port : port;
        resolve();
      });
    });

  const down = async () => {
    const current = server;
    server = null;
    for (const socket of open) socket.destroy();
    open.clear();
    if (current) await new Promise<void>((resolve) => current.close(() => resolve()));
  };

  await listen();
  t.teardown(down);
  return {
    port,
    connections: () => open.size / 2,
    accepted: () => accepted,
    down,
    up: async () => {
      if (!server) await listen();
    },
    close: down,
  };
}
