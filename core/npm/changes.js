// The registry's change feed as an async iterator (docs/change-feed.md): pages
// `GET /api/v1/changes` from a cursor until caught up, then follows
// `GET /api/v1/changes/stream`, resuming with `Last-Event-ID` after a dropped connection, so each
// event is yielded once, in feed order. Plain JavaScript with no dependency: it needs only
// `fetch` and web streams, which browsers and Node 20 have. The stream is read from a fetch body
// rather than with `EventSource`, which Node does not have and which cannot be told to stop
// retrying on a refusal.

/** The feed refused a request (a 4xx or 5xx answer): its status and the API's message. */
export class ChangeFeedError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'ChangeFeedError';
    this.status = status;
  }
}

const FILTERS = ['wallet', 'agentId', 'type'];

/** The query of `/changes` and `/changes/stream` for `options`' filters. */
function filterQuery(options) {
  const query = new URLSearchParams();
  for (const name of FILTERS) {
    const value = options[name];
    if (value === undefined || value === null) continue;
    for (const item of Array.isArray(value) ? value : [value]) query.append(name, String(item));
  }
  if (options.final) query.set('final', 'true');
  return query;
}

async function refusal(response) {
  const body = await response.json().catch(() => null);
  return new ChangeFeedError(response.status, body?.error ?? `HTTP ${response.status}`);
}

/**
 * Splits a Server-Sent Events byte stream into messages, as the HTML standard parses them:
 * lines end in CRLF, LF or CR; `:` starts a comment; a blank line ends a message.
 * Yields `{ id, event, data }` for each message with data, `{ retry }` for a retry field, and
 * `{ lastEventId }` for a message with an id and no data: it dispatches no event, but sets the id
 * an `EventSource` sends back when it reconnects. The feed's stream ends a connection it closes on
 * purpose (its byte budget, its lifetime) with one, naming where to resume.
 */
export async function* parseServerSentEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let message = { id: undefined, event: '', data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      // A CR at the very end may be half of a CRLF: keep it for the next chunk.
      let end;
      while ((end = buffer.search(/\r\n|\n|\r(?!$)/)) !== -1) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
        if (line === '') {
          if (message.data.length > 0) {
            yield { id: message.id, event: message.event || 'message', data: message.data.join('\n') };
          } else if (message.id !== undefined) {
            yield { lastEventId: message.id };
          }
          message = { id: undefined, event: '', data: [] };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (field === 'data') message.data.push(value);
        else if (field === 'event') message.event = value;
        else if (field === 'id' && !value.includes('\0')) message.id = value;
        else if (field === 'retry' && /^\d+$/.test(value)) yield { retry: Number(value) };
      }
    }
  } finally {
    // Whether the body ended, broke or the caller stopped iterating: close the connection (a
    // reader only released would keep it, and with it a Node process, open).
    await reader.cancel().catch(() => {});
  }
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ms);
  signal?.addEventListener('abort', () => { clearTimeout(timer); resolve(); }, { once: true });
});

/**
 * Every event of the feed after `options.after` (or from the oldest kept), then every new one,
 * for as long as the caller iterates (break, or abort `options.signal`, to stop).
 *
 * Options: `base` (the API's origin, e.g. "https://api.example"; "" for the page's own),
 * `after` (an event id), the filters `wallet`, `agentId`, `type` (each a value or an array) and
 * `final` (true: only final events), `pageSize` (1 to 1,000; default 1,000), `signal`, `fetch`
 * (default the global one) and `retryMs` (the wait before a reconnect until the stream names its
 * own `retry`; default 3,000).
 *
 * A refusal (400 for a malformed cursor or filter, 404 for a cursor this feed never gave, 410 for
 * one past the retention, 503 for a deployment without the feed) throws a ChangeFeedError. A
 * dropped stream is reopened after `retryMs` with `Last-Event-ID` set to the last event yielded. A
 * stream the server ended on purpose (a connection's byte budget or lifetime: it names the id to
 * resume after, past the events the filters passed over) is reopened at once from that id.
 */
export async function* followChanges(options = {}) {
  const base = (options.base ?? '').replace(/\/$/, '');
  const fetchFn = options.fetch ?? globalThis.fetch.bind(globalThis);
  const { signal } = options;
  const filters = filterQuery(options);
  let cursor = options.after ?? null;
  let retryMs = options.retryMs ?? 3000;

  // Pages until caught up. A page's `next` is the last event it looked at, selected or not, so
  // the cursor moves on even when a filter selects nothing.
  for (;;) {
    const query = new URLSearchParams(filters);
    query.set('limit', String(options.pageSize ?? 1000));
    if (cursor) query.set('after', cursor);
    const response = await fetchFn(`${base}/api/v1/changes?${query}`, { headers: { accept: 'application/json' }, signal });
    if (!response.ok) throw await refusal(response);
    const page = await response.json();
    for (const event of page.events) yield event;
    cursor = page.next ?? cursor;
    if (!page.more) break;
  }

  // Then the stream, from the cursor. Without one (an empty feed) it starts at the next events.
  while (!signal?.aborted) {
    const headers = { accept: 'text/event-stream' };
    if (cursor) headers['last-event-id'] = cursor;
    let response;
    try {
      response = await fetchFn(`${base}/api/v1/changes/stream?${filters}`, { headers, signal });
    } catch (error) {
      if (signal?.aborted) return;
      await sleep(retryMs, signal);
      continue;
    }
    if (!response.ok) throw await refusal(response);
    // Set when the server ends this stream on purpose, naming where to resume.
    let ended = false;
    try {
      for await (const message of parseServerSentEvents(response.body)) {
        if (message.retry !== undefined) {
          retryMs = message.retry;
          continue;
        }
        if (message.lastEventId !== undefined) {
          cursor = message.lastEventId;
          ended = true;
          continue;
        }
        const event = JSON.parse(message.data);
        cursor = message.id ?? event.id;
        yield event;
      }
    } catch (error) {
      // A connection cut mid-stream: reconnect below. A body that is not JSON is a real fault.
      if (error instanceof SyntaxError) throw error;
    }
    if (signal?.aborted) return;
    if (!ended) await sleep(retryMs, signal);
  }
}
