// The npm package's change-feed iterator (core/pkg/changes.js, `kya-core/changes`) against the
// real Worker under `wrangler dev`, driven by tests/it/edge_api/changes_js.rs:
//
//   KYA_API=<the Worker> EXPECTED_EVENTS=<the feed's events as JSON> node --test tests/js/changes-iterator.test.mjs
//
// The driver writes the feed's first batch and runs the index, then waits for this test to say
// on stdout that the iterator is streaming (`kya-feed: streaming`). It writes the second batch
// and runs the index; the test cuts the stream right after the batch's first event, and the
// iterator reconnects with Last-Event-ID (`kya-feed: resumed <id>`). The driver then writes the
// third batch, more than a connection's byte budget (two events): the Worker ends the connection
// naming where to resume, and the iterator reconnects there at once. The iterator must yield
// exactly the feed's events, in order, none twice; a second one, filtered to agent 2 and
// streaming before the second batch, exactly agent 2's.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ChangeFeedError, followChanges, parseServerSentEvents } from '../../core/pkg/changes.js';

const base = process.env.KYA_API;
const expected = JSON.parse(process.env.EXPECTED_EVENTS ?? 'null');
if (!base || !Array.isArray(expected)) {
  console.error('set KYA_API (the Worker) and EXPECTED_EVENTS (the feed as JSON)');
  process.exit(2);
}

test('pages, then the stream, cut and resumed with Last-Event-ID: every event once, in order', async () => {
  const yielded = [];
  /** Each stream request: the Last-Event-ID it sent, the last event yielded before it, its cutter. */
  const streams = [];
  // Beside it, an iterator filtered to agent 2: the driver writes the next batches once both
  // stream, so the filter applies on the stream part too, not only on the pages.
  let filteredStreaming;
  const bothStreaming = new Promise((resolve) => { filteredStreaming = resolve; });
  const ofAgent2 = expected.filter((event) => event.agentId === 2);
  const filtered = (async () => {
    const events = [];
    const fetchFiltered = async (url, init) => {
      const response = await fetch(url, init);
      if (new URL(url).pathname.endsWith('/changes/stream')) filteredStreaming();
      return response;
    };
    for await (const event of followChanges({ base, agentId: 2, fetch: fetchFiltered })) {
      events.push(event);
      if (events.length >= ofAgent2.length) break;
    }
    return events;
  })();
  const fetchWatched = async (url, init) => {
    if (!new URL(url).pathname.endsWith('/changes/stream')) return fetch(url, init);
    const cutter = new AbortController();
    const stream = { lastEventId: init.headers['last-event-id'] ?? null, before: yielded.at(-1)?.id ?? null, cutter, openedAt: Date.now() };
    streams.push(stream);
    const response = await fetch(url, { ...init, signal: cutter.signal });
    // When its body ends (the Worker ended it, or the cut), for the gap to the next connection.
    const [body, watched] = response.body.tee();
    const reader = watched.getReader();
    stream.stopWatching = () => reader.cancel().catch(() => {});
    (async () => {
      // Whether the Worker ended it with a planned end that names where to resume (a budget or
      // lifetime end): only after those does the iterator reconnect at once.
      const decoder = new TextDecoder();
      let text = '';
      try {
        for (let read = await reader.read(); !read.done; read = await reader.read()) text += decoder.decode(read.value, { stream: true });
      } catch { /* cut */ }
      stream.planned = /(^|\n): end \S+ last-event-id=\S+/.test(text);
      stream.endedAt = Date.now();
    })();
    if (streams.length === 1) await bothStreaming;
    console.log(streams.length === 1 ? 'kya-feed: streaming' : `kya-feed: resumed ${stream.lastEventId}`);
    return new Response(body, { status: response.status, headers: response.headers });
  };
  const firstOfSecondBatch = expected.find((event) => event.id.startsWith('2-')).id;
  for await (const event of followChanges({ base, fetch: fetchWatched })) {
    yielded.push(event);
    // A dropped connection, cut by the client: the iterator must reconnect by itself.
    if (event.id === firstOfSecondBatch && streams.length === 1) streams[0].cutter.abort();
    if (yielded.length >= expected.length) break;
  }
  // The last connection is still open: its watcher would keep node running.
  for (const stream of streams) stream.stopWatching();
  assert.deepEqual(yielded, expected);
  assert.equal(new Set(yielded.map((event) => event.id)).size, yielded.length, 'no event twice');
  assert.ok(ofAgent2.some((event) => !event.id.startsWith('1-')), 'agent 2 has events past the pages');
  assert.deepEqual(await filtered, ofAgent2, "agent 2's events, once each, pages and stream alike");
  // The first connection from where the pages ended, the second from the last event yielded
  // before the cut, and each later one from where the Worker's end of the one before said: with
  // no filter, the last event it sent, so the last yielded.
  const lastOfFirstBatch = expected.filter((event) => event.id.startsWith('1-')).at(-1).id;
  assert.equal(streams[0].lastEventId, lastOfFirstBatch);
  for (const stream of streams) assert.equal(stream.lastEventId, stream.before, 'resumed after the last event yielded');
  assert.ok(streams[1].before?.startsWith('2-'), `cut within the second batch: ${streams[1].before}`);
  // Batch 3's five events, two a connection: at least two ends of the Worker's, each followed
  // at once by the next connection (a dropped stream waits the stream's `retry` of 3 s first).
  assert.ok(streams.length >= 4, `${streams.length} connections`);
  // (An end that names no id, as a failed read's `unavailable`, is waited out like a cut.)
  const gaps = streams.slice(2).filter((_, at) => streams[at + 1].planned)
    .map((stream) => stream.openedAt - streams[streams.indexOf(stream) - 1].endedAt);
  assert.ok(gaps.length >= 2, `${gaps.length} planned ends of the Worker's`);
  assert.ok(gaps.every((gap) => gap < 1000), `reconnected at once: ${gaps.join(', ')} ms`);
});

test('the filters select as /changes does', async () => {
  const of = async (options, count) => {
    const events = [];
    for await (const event of followChanges({ base, ...options })) {
      events.push(event);
      if (events.length === count) break;
    }
    return events;
  };
  const ofAgent2 = expected.filter((event) => event.agentId === 2);
  assert.deepEqual(await of({ agentId: 2 }, ofAgent2.length), ofAgent2);
  const flips = expected.filter((event) => event.type === 'agent.compliance_changed' && event.finality === 'final');
  assert.deepEqual(await of({ type: ['agent.compliance_changed'], final: true }, flips.length), flips);
  const wallet = expected[0].wallet;
  const ofWallet = expected.filter((event) => event.wallet === wallet).slice(2);
  assert.deepEqual(await of({ wallet: wallet.toLowerCase(), after: expected[1].id, pageSize: 1 }, ofWallet.length), ofWallet);
});

test("a refused cursor throws the API's status and message", async () => {
  const first = (options) => followChanges({ base, ...options }).next();
  await assert.rejects(first({ after: 'abc' }), (error) => error instanceof ChangeFeedError && error.status === 400
    && error.message === "invalid query parameter 'after': must be an event id such as 12-0, as the feed gave it");
  await assert.rejects(first({ after: '99-0' }), (error) => error instanceof ChangeFeedError && error.status === 404
    && /^Agent not found: no event 99-0 in this change feed/.test(error.message));
});

test('the SSE parser: any line ending, split anywhere, comments, multi-line data, retry, an id alone', async () => {
  const text = 'retry: 3000\r\n: after 1-2\r\n\r\nid: 2-0\revent: a\rdata: {"x":\rdata: 1}\r\r'
    + ': keep-alive\n\nid: 2-1\nevent: b\ndata:plain\n\ndata: no id\r\n\r\n: end budget last-event-id=3-0\nid: 3-0\n\n';
  const bytes = new TextEncoder().encode(text);
  // One byte at a time: every line ending, CRLF included, is split across chunks somewhere.
  const body = new ReadableStream({
    start(controller) {
      for (const byte of bytes) controller.enqueue(new Uint8Array([byte]));
      controller.close();
    },
  });
  const messages = [];
  for await (const message of parseServerSentEvents(body)) messages.push(message);
  assert.deepEqual(messages, [
    { retry: 3000 },
    { id: '2-0', event: 'a', data: '{"x":\n1}' },
    { id: '2-1', event: 'b', data: 'plain' },
    { id: undefined, event: 'message', data: 'no id' },
    // A message with an id and no data (the Worker's end of a connection): where to resume.
    { lastEventId: '3-0' },
  ]);
});
