import type { RateGroup } from '../config/defaults.js';

/** The spec's five groups, by method and route template. */
export function rateGroupFor(method: string, routePath: string): RateGroup {
  const upper = method.toUpperCase();
  if (upper === 'GET' || upper === 'HEAD') {
    return routePath.startsWith('/v1/webhook_deliveries') ? 'webhook_deliveries' : 'read';
  }
  if (upper === 'POST' && routePath === '/v1/refresh_intents') return 'sync_write';
  if (upper === 'POST' && routePath === '/v1/widget_tokens') return 'widget_tokens';
  return 'resource_write';
}
