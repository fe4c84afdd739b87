import { loadConfig } from '../config/load-config.js';
import { ROLES, SchemaMismatchError, type RoleName } from './roles.js';

/**
 * Entry of one supervised process: `node child.js <role>`. The first SIGTERM drains and exits 0; an error
 * exits non-zero so the supervisor restarts it. Exit 78 (EX_CONFIG) means restarting will not help.
 */
async function main(): Promise<void> {
  const role = ROLES[process.argv[2] as RoleName];
  if (!role) {
    process.stderr.write(`unknown role ${process.argv[2]}\n`);
    process.exit(64);
  }
  const config = loadConfig({ env: process.env });
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  // The supervisor died without stopping us (`kill -9` of svc serve): drain and exit rather than run on as
  // an orphan that nobody supervises and that keeps the API port from the next svc serve.
  process.once('disconnect', stop);
  try {
    await role.run(config, controller.signal, () => process.send?.({ type: 'ready', role: role.name }));
    process.exit(0);
  } catch (error) {
    process.stderr.write(`${role.name}: ${(error as Error).message}\n`);
    process.exit(error instanceof SchemaMismatchError ? 78 : 1);
  }
}

void main();
