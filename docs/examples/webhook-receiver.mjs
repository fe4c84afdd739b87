// webhook-receiver.mjs: a receiver with no dependencies. Run it beside verify-signature.mjs:
//   SVC_WEBHOOK_SECRET=whsec_… node webhook-receiver.mjs
// SVC_WEBHOOK_SECRET may list several secrets, comma-separated (one per endpoint that posts here);
// PORT (default 3000) is where it listens, on 127.0.0.1.
import { createServer } from 'node:http';
import { verifySignature } from './verify-signature.mjs';

const secrets = (process.env.SVC_WEBHOOK_SECRET ?? '').split(',').filter(Boolean);
const seen = new Set();

createServer(async (req, res) => {
  if (req.method !== 'POST' || req.url !== '/hooks/svc') return res.writeHead(404).end();
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const rawBody = Buffer.concat(chunks); // the raw bytes: parse only after the check
  const header = req.headers['svc-signature'];
  if (!secrets.some((secret) => verifySignature(rawBody, header, secret))) {
    console.log('refused: bad signature');
    return res.writeHead(400).end('bad signature');
  }
  const event = JSON.parse(rawBody.toString('utf8'));
  if (seen.has(event.id)) return res.writeHead(204).end(); // at least once: deduplicate on id
  seen.add(event.id);
  console.log(`verified ${event.type} ${event.id}`);
  // … handle event.type; answer quickly and do slow work afterwards …
  res.writeHead(204).end();
}).listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => console.log('listening'));
