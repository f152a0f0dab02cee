// What a provider does with a signed request it received, for tests/js/erc8128-interop.mjs: the
// body of POST /api/v1/kya/verify made from a fetch Request, and a nonce store for
// @slicekit/erc8128's own verifier.

/** The verify endpoint's body for `request` as received (INTERFACE.md section 6). */
export async function forwardedBody(request) {
  const body = { method: request.method, url: request.url, headers: Object.fromEntries(request.headers) };
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
