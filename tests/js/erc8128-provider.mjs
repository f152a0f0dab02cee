// What a provider does with a signed request it received, for tests/js/erc8128-interop.mjs: the
// body of POST /api/v1/kya/verify made from a fetch Request, and a nonce store for
// @slicekit/erc8128's own verifier.

/** The host these tests' provider serves: its own setting, never read from a request. */
export const SERVED_AUTHORITY = 'api.provider.example';

/** The verify endpoint's body for `request` as received (INTERFACE.md section 6), with the
 * authority the provider serves, which the endpoint requires. */
export async function forwardedBody(request, authority = SERVED_AUTHORITY) {
  const body = { method: request.method, url: request.url, headers: Object.fromEntries(request.headers), authority };
  const bytes = Buffer.from(await request.clone().arrayBuffer());
  if (bytes.length > 0) {
    body.body = bytes.toString('base64');
  }
  return body;
}

/** @slicekit/erc8128's `NonceStore`: each key accepted once; `seen` maps it to its TTL. */
export class OnceNonceStore {
  seen = new Map();

  async consume(key, ttlSeconds) {
    if (this.seen.has(key)) {
      return false;
    }
    this.seen.set(key, ttlSeconds);
    return true;
  }
}
