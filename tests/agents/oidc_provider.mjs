// A real OpenID provider for the sign-in tests: node-oidc-provider (OpenID
// certified), with the few settings a test office needs.
//   node oidc_provider.mjs PORT ACCOUNTS_FILE CLIENTS_JSON (on the Node 22 of node_modules/node)
// ACCOUNTS_FILE: {"alice": {"name": ..., "email": ..., "groups": [...], "disabled": false}, ...} (keyed by
// the account's `sub`; "username": its preferred_username where it is not the sub), read on
// every lookup, so a test disables a person by rewriting it (their refresh tokens then fail).
// CLIENTS_JSON: the registered clients (client_id, client_secret, redirect_uris).
// RESOURCE_JSON (optional): the provider is then also the authorization server of an OAuth-protected MCP server,
// {"resource": its URL, "scope": what its tokens carry, "ttl": their seconds, "introspector": the server's own
// client}: clients register themselves
// (RFC 7591), ask for that resource (RFC 8707) and get short opaque tokens bound to it, which the server
// checks at the introspection endpoint (RFC 7662).
// Sign-in is the library's development login form (any password); consent is granted at once for the
// registered first-party clients; PKCE is required; refresh tokens are issued to clients allowed them.
import fs from 'node:fs';
import Provider, { errors } from 'oidc-provider';

const [port, accountsFile, clientsJson, resourceJson] = process.argv.slice(2);
const accounts = () => JSON.parse(fs.readFileSync(accountsFile, 'utf8'));
const served = resourceJson ? JSON.parse(resourceJson) : null;
const SCOPES = 'openid offline_access profile email groups';

// The MCP server's features: registration, introspection, and tokens bound to its resource.
const resourceFeatures = served ? {
  registration: { enabled: true },
  introspection: { enabled: true, allowedPolicy: (ctx, client) => client.clientId === served.introspector },
  resourceIndicators: {
    enabled: true,
    defaultResource: () => served.resource,
    useGrantedResource: () => true,
    getResourceServerInfo: (ctx, indicator) => {
      if (indicator !== served.resource) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
      return { scope: served.scope, audience: served.resource, accessTokenTTL: served.ttl, accessTokenFormat: 'opaque' };
    },
  },
} : {};

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: JSON.parse(clientsJson),
  pkce: { required: () => true },
  scopes: SCOPES.split(' '),
  claims: { openid: ['sub'], profile: ['name', 'preferred_username'], email: ['email'], groups: ['groups'] },
  async findAccount(ctx, sub) {
    const account = accounts()[sub];
    if (!account || account.disabled) return undefined;
    return {
      accountId: sub,
      async claims() {
        return { sub, preferred_username: account.username || sub, name: account.name, email: account.email,
                 groups: account.groups };
      },
    };
  },
  async loadExistingGrant(ctx) {
    const found = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (found) return ctx.oidc.provider.Grant.find(found);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope(SCOPES);
    grant.addOIDCClaims(['name', 'preferred_username', 'email', 'groups']);
    if (served) grant.addResourceScope(served.resource, served.scope);
    await grant.save();
    return grant;
  },
  // An account marked "no_refresh" is given none (as a provider that was not asked for offline_access).
  issueRefreshToken: async (ctx, client, code) => client.grantTypeAllowed('refresh_token')
    && !accounts()[code.accountId]?.no_refresh,
  features: { devInteractions: { enabled: true }, revocation: { enabled: true }, ...resourceFeatures },
  ttl: { AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL || 600, IdToken: 600, RefreshToken: 86400, Grant: 86400, Session: 86400, Interaction: 600 },
  cookies: { keys: ['switchboard-test-provider'] },
});
// A refused grant's reason (the library answers only "grant request is invalid"), for a test's failure to show.
provider.on('grant.error', (ctx, error) => console.log(`grant.error: ${error.message} (${error.error_detail})`));
provider.listen(Number(port), '127.0.0.1', () => console.log(`provider ready on ${port}`));
