// Types of the change feed's events (edge-api/openapi.json, schema ChangeEvent) and of
// `followChanges` (changes.js). Timestamps are ISO 8601 strings, as the API gives them.

export type ChangeType =
  | 'agent.registered'
  | 'agent.status_changed'
  | 'agent.attested'
  | 'agent.attestation_expired'
  | 'agent.revenue_reported'
  | 'agent.compliance_changed'
  | 'agent.unregistered';
export type AgentStatus = 'Active' | 'Suspended' | 'Revoked' | 'Terminated';
/** `<batch>-<index>`: ids compare as the feed is ordered. */
export type EventId = string;
export type Finality = 'provisional' | 'final' | 'retracted';

/** What every event carries. */
export interface ChangeEventBase {
  id: EventId;
  finality: Finality;
  /** With `finality: "final"`: the provisional event it settles. */
  confirms?: EventId;
  /** With `finality: "retracted"`: the provisional event a reorganisation removed. */
  retracts?: EventId;
  agentId: number;
  wallet: `0x${string}`;
  block: { number: number; hash: `0x${string}`; time: string };
  /** The log the change was read from; null for what time made and for a correction. */
  log: { transactionHash: `0x${string}`; logIndex: number } | null;
  /** The agent's standing after the change, as `/kya/<wallet>` answers at that block. */
  standing: { isRegistered: boolean; isCompliant: boolean; status: AgentStatus | null };
}

export interface AgentRegistered extends ChangeEventBase { type: 'agent.registered' }
export interface AgentStatusChanged extends ChangeEventBase { type: 'agent.status_changed'; from: AgentStatus; to: AgentStatus }
export interface AgentAttested extends ChangeEventBase { type: 'agent.attested'; attestedAt: string }
export interface AgentAttestationExpired extends ChangeEventBase {
  type: 'agent.attestation_expired';
  lastAttestation: string;
  /** The attestation's last current second. */
  validUntil: string;
}
export interface AgentRevenueReported extends ChangeEventBase { type: 'agent.revenue_reported' }
export interface AgentComplianceChanged extends ChangeEventBase { type: 'agent.compliance_changed'; from: boolean; to: boolean }
/**
 * A correction: the chain no longer holds the registration the feed showed for this wallet (a
 * reorganisation deeper than the finality depth took it away, or gave its id to another wallet).
 */
export interface AgentUnregistered extends ChangeEventBase { type: 'agent.unregistered' }

/** One event of the feed: narrow on `type`. */
export type ChangeEvent =
  | AgentRegistered
  | AgentStatusChanged
  | AgentAttested
  | AgentAttestationExpired
  | AgentRevenueReported
  | AgentComplianceChanged
  | AgentUnregistered;

/** A page of `GET /api/v1/changes`. */
export interface ChangesPage { events: ChangeEvent[]; next: EventId | null; more: boolean }

export interface FollowChangesOptions {
  /** The API's origin ("https://api.example"); "" or absent: the page's own. */
  base?: string;
  /** Start after this event; absent: from the oldest event kept. */
  after?: EventId;
  wallet?: string | string[];
  agentId?: number | number[];
  type?: ChangeType | ChangeType[];
  /** Only `final` events. */
  final?: boolean;
  /** Events per page while catching up, 1 to 1,000 (default 1,000). */
  pageSize?: number;
  signal?: AbortSignal;
  fetch?: typeof fetch;
  /** Wait before a reconnect until the stream names its own `retry` (default 3,000 ms). */
  retryMs?: number;
}

/** A refusal of the feed (400, 404, 410, 503 …) with the API's message. */
export class ChangeFeedError extends Error {
  readonly status: number;
  constructor(status: number, message: string);
}

/** Every event after `after`, then every new one, each once and in order, for as long as the
 * caller iterates; reconnects with `Last-Event-ID` (at once when the server ended the stream on
 * purpose, naming the id to resume after; else after `retryMs`). */
export function followChanges(options?: FollowChangesOptions): AsyncGenerator<ChangeEvent, void, undefined>;

/** A Server-Sent Events body split into its messages, its `retry` fields, and the ids of messages
 * without data (`{ lastEventId }`: an id an `EventSource` would send back, as the feed's stream
 * names where to resume when it ends a connection). */
export function parseServerSentEvents(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<
  { id: string | undefined; event: string; data: string } | { retry: number } | { lastEventId: string },
  void,
  undefined
>;
