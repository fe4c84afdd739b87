import { errors } from '../../../errors/api-error.js';
import type { ConsoleRoute } from '../../kit.js';
import { scopedDelivery, scopedEndpoint } from './common.js';
import { redeliverAction, showDeliveries, showDelivery } from './deliveries.js';
import {
  disableEndpointAction,
  enableEndpointAction,
  rollSecretAction,
  showEndpoint,
  updateEndpointAction,
} from './endpoint.js';
import { createEndpointAction, fireAction, fireAddress, showEndpoints } from './endpoints.js';

/*
 * The webhooks section of an organisation (docs/console.md, Webhooks): one handler per route. Reading is
 * everyone's; redelivering is `operate` (support too); changing endpoints and firing are `manage`. A route
 * with `find` answers 404 for another scope's endpoint or delivery before it says anything else.
 */

/** Sandbox events are test mode's alone: in live mode there is nothing to fire, for anyone. */
const testModeOnly: ConsoleRoute['find'] = async (ctx, kit) => {
  if (kit.state(ctx).scope.mode !== 'test') throw errors.notFound('Sandbox events fire in test mode only.');
};

export const webhookRoutes: ConsoleRoute[] = [
  { method: 'get', path: '/webhooks', needs: 'read', handle: showEndpoints },
  { method: 'post', path: '/webhooks', needs: 'manage', handle: createEndpointAction },
  // Deliveries and firing before `/webhooks/:endpoint`, which would take their first segment for an id.
  { method: 'get', path: '/webhooks/deliveries', needs: 'read', handle: showDeliveries },
  {
    method: 'get',
    path: '/webhooks/deliveries/:delivery',
    needs: 'read',
    find: scopedDelivery,
    handle: showDelivery,
  },
  {
    method: 'post',
    path: '/webhooks/deliveries/:delivery/redeliver',
    needs: 'operate',
    find: scopedDelivery,
    handle: redeliverAction,
  },
  { method: 'get', path: '/webhooks/fire', needs: 'read', handle: fireAddress },
  { method: 'post', path: '/webhooks/fire', needs: 'manage', find: testModeOnly, handle: fireAction },
  { method: 'get', path: '/webhooks/:endpoint', needs: 'read', find: scopedEndpoint, handle: showEndpoint },
  {
    method: 'post',
    path: '/webhooks/:endpoint',
    needs: 'manage',
    find: scopedEndpoint,
    handle: updateEndpointAction,
  },
  {
    method: 'post',
    path: '/webhooks/:endpoint/disable',
    needs: 'manage',
    find: scopedEndpoint,
    handle: disableEndpointAction,
  },
  {
    method: 'post',
    path: '/webhooks/:endpoint/enable',
    needs: 'manage',
    find: scopedEndpoint,
    handle: enableEndpointAction,
  },
  {
    method: 'post',
    path: '/webhooks/:endpoint/roll',
    needs: 'manage',
    find: scopedEndpoint,
    handle: rollSecretAction,
  },
];
