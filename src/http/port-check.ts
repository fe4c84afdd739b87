import { createServer } from 'node:net';

/**
 * Whether the API could listen on `host:port`, tried by `svc serve` before it starts any process: a taken
 * port used to crash-loop the api child five times (about 8 s) before `serve` gave up with a log line.
 * Returns the sentence to print, or null when the port is free. The listener is closed at once; the api
 * child binds the port again a second later, so another program could take it in between, and then the
 * supervisor's crash-loop report still names the port.
 */
export async function apiPortProblem(
  host: string,
  port: number,
  servesOfThisHome: readonly { pid: number }[],
): Promise<string | null> {
  const code = await new Promise<string | null>((resolve) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    server.listen({ host, port }, () => server.close(() => resolve(null)));
  });
  if (code === null) return null;
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const otherPort = 'choose another port with svc serve --port N, or api.port in config.json (SVC_API_PORT)';
  switch (code) {
    case 'EADDRINUSE': {
      const serve = servesOfThisHome[0];
      const who = serve
        ? `svc serve (pid ${serve.pid}) already runs from this data directory (svc status shows it)`
        : 'another program listens there (ss -ltnp shows which)';
      return `Port ${port} is already in use on ${host} (EADDRINUSE): ${who}. Stop it, or ${otherPort}.`;
    }
    case 'EACCES':
      return `Cannot listen on ${address} (EACCES): ports below 1024 need root or CAP_NET_BIND_SERVICE; ${otherPort}.`;
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `Cannot listen on ${address} (${code}): ${host} is not an address of this machine; set api.host in config.json (SVC_API_HOST) or svc serve --host to one of its addresses, or 0.0.0.0.`;
    default:
      return `Cannot listen on ${address} (${code}); ${otherPort}.`;
  }
}
