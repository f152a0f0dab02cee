// The KYA registry explorer. Reads only the public /api/v1 endpoints of the same origin and
// computes compliance badges, KYA decisions and address checks with kya-core's wasm package
// (./pkg/, built by scripts/build-core-wasm.sh and copied by scripts/build-explorer.sh), so the
// page and the API run the same rules. "Now" for a badge is the timestamp of the block the
// answer was read at (X-Block-Timestamp), never the browser's clock.
import init, * as kya from './pkg/kya_core.js';

const PAGE_SIZE = 20;
const SVG_NS = 'http://www.w3.org/2000/svg';
const BADGE_LABELS = {
  compliant: 'Compliant',
  lapsed: 'Lapsed',
  suspended: 'Suspended',
  revoked: 'Revoked',
  terminated: 'Terminated',
  unregistered: 'Not registered',
};
const DECISION_HINTS = {
  provision: 'registered and compliant: serve this agent',
  'renew attestation': 'registered but not compliant: ask for a fresh attestation',
  'deny or register': 'no active registration for this wallet: deny, or ask it to register',
};
const STATUSES = ['Active', 'Suspended', 'Revoked', 'Terminated'];

const $ = (id) => document.getElementById(id);

/** An API error answer (`{"error": …}`) or a network failure. */
class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// ---------------------------------------------------------------------------------------------
// API access

/** The newest block any answer was read at, shown in the header. */
let newestBlock = null;

/** GET an /api/v1 path: its JSON body and the block it was read at. `pinned: false` for an
 * answer read at no one block (the change feed's: each event names its own). */
async function api(path, { pinned = true } = {}) {
  let response;
  try {
    response = await fetch(path, { headers: { accept: 'application/json' } });
  } catch (error) {
    throw new ApiError(0, `The API cannot be reached (${error.message}).`);
  }
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    throw new ApiError(response.status, body?.error ?? `HTTP ${response.status}`);
  }
  if (!pinned) return { body, block: null };
  const number = Number(response.headers.get('x-block-number'));
  const timestamp = Number(response.headers.get('x-block-timestamp'));
  if (!Number.isSafeInteger(timestamp) || timestamp <= 0) {
    throw new ApiError(response.status, `${path}: the answer names no block (X-Block-Timestamp)`);
  }
  // The registry's grace period at that block, which the answer's compliance was judged by
  // (answers that state compliance name it; the owner may change it, so it is never assumed).
  const grace = response.headers.get('x-attestation-grace-period');
  const block = { number, timestamp, gracePeriod: grace === null ? null : Number(grace) };
  if (!newestBlock || block.number > newestBlock.number) {
    newestBlock = block;
    const chainBlock = $('chain-block');
    chainBlock.textContent = `Block #${number} · chain time ${isoSeconds(timestamp)}`;
    chainBlock.dataset.blockNumber = String(number);
    chainBlock.dataset.blockTimestamp = String(timestamp);
  }
  return { body, block };
}

// ---------------------------------------------------------------------------------------------
// Small helpers

/** What compliance at `block` is judged by: its time and the registry's grace period there. */
function clockOf(block) {
  const grace = block.gracePeriod;
  if (grace === null || !Number.isFinite(grace) || grace < 0) {
    throw new ApiError(0, `the answer at block #${block.number} names no grace period (X-Attestation-Grace-Period)`);
  }
  // A period past 2^53 seconds (the owner may set any uint256) keeps every attestation current,
  // as the largest whole number a JavaScript number holds does.
  return { time: block.timestamp, gracePeriod: Math.min(grace, Number.MAX_SAFE_INTEGER) };
}

function isoSeconds(seconds) {
  return new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');
}

/** A duration in words: "8 days", "3 hours", "42 seconds". */
function duration(seconds) {
  const units = [['day', 86400], ['hour', 3600], ['minute', 60], ['second', 1]];
  for (const [name, size] of units) {
    if (seconds >= size || size === 1) {
      const count = Math.floor(seconds / size);
      return `${count} ${name}${count === 1 ? '' : 's'}`;
    }
  }
  return '';
}

function shortAddress(address) {
  return `${address.slice(0, 6)}…${address.slice(-4)}`;
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'className') node.className = value;
    else if (name === 'onclick') node.addEventListener('click', value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

function svgElement(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined && value !== null) node.setAttribute(name, String(value));
  }
  node.append(...children);
  return node;
}

function statusPill(status) {
  return element('span', { className: `pill status-${status.toLowerCase()}`, 'data-status': status }, status);
}

function showError(target, message) {
  target.textContent = message;
  target.hidden = !message;
}

function agentLink(agentId, text = `#${agentId}`) {
  return element('a', { href: `#agent=${agentId}`, 'data-agent-link': agentId }, text);
}

// ---------------------------------------------------------------------------------------------
// Search and the agent record

/** What the search box holds: an agent id, a wallet, or the reason it is neither. */
function parseQuery(text) {
  const trimmed = text.trim();
  if (/^[0-9]+$/.test(trimmed)) {
    const id = Number(trimmed);
    if (Number.isSafeInteger(id) && id > 0) return { agentId: id };
    return { error: 'Agent ids are positive whole numbers.' };
  }
  if (/^0x/i.test(trimmed)) {
    if (kya.isAddress(trimmed)) return { wallet: kya.checksumAddress(trimmed) };
    try {
      kya.checksumAddress(trimmed);
    } catch (error) {
      return { error: `Not a wallet address: ${error.message}` };
    }
  }
  return { error: 'Enter an agent id (e.g. 1) or a wallet address (0x followed by 40 hex digits).' };
}

function onSearch(event) {
  event.preventDefault();
  const query = parseQuery($('search-input').value);
  if (query.error) {
    showError($('search-error'), query.error);
    $('search-input').setAttribute('aria-invalid', 'true');
    return;
  }
  showError($('search-error'), '');
  $('search-input').removeAttribute('aria-invalid');
  const hash = query.wallet ? `#wallet=${query.wallet}` : `#agent=${query.agentId}`;
  if (location.hash === hash) route();
  else location.hash = hash;
}

/** Shows what the URL's hash names (`#agent=5`, `#wallet=0x…`). */
function route() {
  const match = /^#(agent|wallet)=(.+)$/.exec(location.hash);
  if (!match) return;
  const query = parseQuery(decodeURIComponent(match[2]));
  if (query.error) {
    showError($('search-error'), query.error);
    return;
  }
  $('search-input').value = query.wallet ?? String(query.agentId);
  if (query.wallet) lookUpWallet(query.wallet);
  else lookUpAgent(query.agentId, null);
}

let lookupSerial = 0;

function setPanelState(panel, state, key) {
  panel.hidden = false;
  panel.dataset.state = state;
  panel.setAttribute('aria-busy', state === 'loading' ? 'true' : 'false');
  if (key !== undefined) panel.dataset.query = key;
}

/** KYA check of a wallet, then the agent's full record when it has one. */
async function lookUpWallet(wallet) {
  const serial = ++lookupSerial;
  const panel = $('agent-panel');
  setPanelState(panel, 'loading', wallet);
  try {
    const { body: result, block } = await api(`/api/v1/kya/${wallet}`);
    if (serial !== lookupSerial) return;
    let isCompliant = false;
    if (result.isRegistered) {
      isCompliant = kya.evaluateCompliance(result.agent, clockOf(block), 0).isCompliant;
    }
    const decision = kya.kyaDecision(result.isRegistered, isCompliant);
    const kyaView = { wallet: result.wallet, decision, block };
    if (!result.isRegistered) {
      renderUnregistered(kyaView);
      setPanelState(panel, 'ready', wallet);
      return;
    }
    await lookUpAgent(result.agent.agentId, kyaView, serial);
  } catch (error) {
    if (serial === lookupSerial) renderLookupError(error, wallet);
  }
}

/** The full record of one agent, with its badge at the chain time of the answer. */
async function lookUpAgent(agentId, kyaView, serial = ++lookupSerial) {
  const panel = $('agent-panel');
  const key = kyaView ? kyaView.wallet : String(agentId);
  setPanelState(panel, 'loading', key);
  try {
    const { body, block } = await api(`/api/v1/agent/${agentId}`);
    if (serial !== lookupSerial) return;
    renderAgent(body, block, kyaView);
    setPanelState(panel, 'ready', key);
    // Opened from the list or the tree further down: bring the record into view.
    panel.scrollIntoView({ block: 'nearest' });
    if (!$('lineage-panel').hidden && $('lineage-panel').dataset.root !== String(agentId)) {
      $('lineage-panel').hidden = true;
    }
  } catch (error) {
    if (serial === lookupSerial) renderLookupError(error, key);
  }
}

function renderLookupError(error, key) {
  const panel = $('agent-panel');
  panel.hidden = true;
  panel.dataset.state = 'error';
  panel.dataset.query = key;
  showError($('search-error'), error.status === 404 ? `${error.message}.` : `Lookup failed: ${error.message}`);
}

function setBadge(word) {
  const badge = $('agent-badge');
  badge.textContent = BADGE_LABELS[word] ?? word;
  badge.className = `badge badge-${word}`;
  badge.dataset.badge = word;
}

function renderKya(kyaView) {
  $('kya-result').hidden = !kyaView;
  if (!kyaView) return;
  $('kya-wallet').textContent = kyaView.wallet;
  const decision = $('kya-decision');
  decision.textContent = kyaView.decision;
  decision.dataset.decision = kyaView.decision;
  decision.className = `decision decision-${kyaView.decision.replaceAll(' ', '-')}`;
  decision.title = DECISION_HINTS[kyaView.decision] ?? '';
}

function renderUnregistered(kyaView) {
  const panel = $('agent-panel');
  delete panel.dataset.agentId;
  $('agent-title').textContent = 'No agent for this wallet';
  setBadge('unregistered');
  renderKya(kyaView);
  $('agent-summary').textContent =
    `At block #${kyaView.block.number} this wallet belongs to no registered agent ` +
    '(an agent that terminated itself frees its wallet; a revoked agent keeps it).';
  $('agent-record').replaceChildren();
  $('agent-children').replaceChildren();
  $('children-count').textContent = '';
  $('show-lineage').hidden = true;
  $('lineage-panel').hidden = true;
}

function timeValue(iso) {
  if (iso === null) return element('span', { className: 'muted' }, 'never');
  // A line may break between the date and the time (not elsewhere): a phone's narrow column
  // shows both whole. The text stays the ISO string.
  const [date, time] = iso.split('T');
  return time === undefined
    ? element('time', { datetime: iso }, iso)
    : element('time', { datetime: iso }, date, element('wbr'), `T${time}`);
}

function renderAgent(detail, block, kyaView) {
  const { agent, children } = detail;
  const clock = clockOf(block);
  const badge = kya.complianceBadge(agent, clock);
  const compliance = kya.evaluateCompliance(agent, clock, children.length);
  const panel = $('agent-panel');
  panel.dataset.agentId = String(agent.agentId);
  panel.dataset.blockNumber = String(block.number);
  $('agent-title').textContent = `Agent #${agent.agentId}`;
  setBadge(badge);
  renderKya(kyaView);

  const age = compliance.secondsSinceAttestation;
  const attested = agent.lastAttestation === null
    ? 'Never attested.'
    : `Last attested ${duration(age)} before block #${block.number} ` +
      `(${compliance.attestationCurrent ? 'within' : 'older than'} the registry's grace period ` +
      `of ${duration(clock.gracePeriod)} at that block).`;
  const verdict = {
    compliant: 'Active and attested: compliant.',
    lapsed: 'Active, but its attestation has lapsed: not compliant until it attests again.',
    suspended: 'Suspended by a regulator: not compliant.',
    revoked: 'Revoked: permanently out of the registry.',
    terminated: 'Terminated: permanently out of the registry.',
  }[badge];
  $('agent-summary').textContent = `${verdict} ${attested}`;

  const parent = agent.parentAgentId === 0
    ? element('span', { className: 'muted' }, 'none (root agent)')
    : agentLink(agent.parentAgentId);
  const rows = [
    ['agentId', 'Agent id', String(agent.agentId)],
    ['status', 'Status', statusPill(agent.status)],
    ['agentWallet', 'Agent wallet', element('code', {}, agent.agentWallet)],
    ['creator', 'Creator', element('code', {}, agent.creator)],
    ['haftungsperson', 'Liable person (Haftungsperson)', element('code', {}, agent.haftungsperson)],
    ['operationalScope', 'Operational scope', agent.operationalScope],
    ['parentAgentId', 'Parent', parent],
    ['generation', 'Generation', String(agent.generation)],
    ['selfModifying', 'Self-modifying', agent.selfModifying ? 'yes' : 'no'],
    ['registeredAt', 'Registered', timeValue(agent.registeredAt)],
    ['lastAttestation', 'Last attestation', timeValue(agent.lastAttestation)],
    ['lastRevenueReport', 'Last revenue report', timeValue(agent.lastRevenueReport)],
    ['constitutionHash', 'Constitution hash', element('code', { className: 'hash' }, agent.constitutionHash)],
    ['capabilityHash', 'Capability hash', element('code', { className: 'hash' }, agent.capabilityHash)],
  ];
  $('agent-record').replaceChildren(
    ...rows.map(([field, label, value]) =>
      element('div', { className: 'record-row' },
        element('dt', {}, label),
        element('dd', { 'data-field': field, 'data-testid': `field-${field}` }, value))),
  );
  $('children-count').textContent = `(${children.length})`;
  $('agent-children').replaceChildren(
    ...(children.length === 0
      ? [element('li', { className: 'muted' }, 'none')]
      : children.map((id) => element('li', {}, agentLink(id)))),
  );
  const lineageButton = $('show-lineage');
  lineageButton.hidden = false;
  lineageButton.dataset.agentId = String(agent.agentId);
}

// ---------------------------------------------------------------------------------------------
// Lineage tree (SVG, root on the left, one row per leaf)

const TREE = { column: 190, row: 54, nodeWidth: 158, nodeHeight: 42, margin: 12 };

/** Positions of every node (depth, row), links, and placeholders for cut children. */
function layoutTree(root) {
  const nodes = [];
  const links = [];
  const cuts = [];
  let nextRow = 0;
  const visit = (node, depth) => {
    const entry = { node, depth, row: 0 };
    nodes.push(entry);
    const placed = node.children.map((child) => {
      const childEntry = visit(child, depth + 1);
      links.push([entry, childEntry]);
      return childEntry;
    });
    if (node.truncated) {
      const hidden = node.totalChildren - node.children.length;
      const more = { more: hidden, parent: node, depth: depth + 1, row: nextRow++ };
      cuts.push({ agentId: node.agentId, total: node.totalChildren, shown: node.children.length });
      nodes.push(more);
      links.push([entry, more]);
      placed.push(more);
    }
    // A parent sits level with its first child, so a wide family starts in view (not mid-scroll).
    entry.row = placed.length === 0 ? nextRow++ : placed[0].row;
    return entry;
  };
  visit(root, 0);
  return { nodes, links, cuts, rows: nextRow };
}

function renderLineage(root) {
  const { nodes, links, cuts, rows } = layoutTree(root);
  const depth = Math.max(...nodes.map((entry) => entry.depth)) + 1;
  const width = TREE.margin * 2 + (depth - 1) * TREE.column + TREE.nodeWidth;
  const height = TREE.margin * 2 + (rows - 1) * TREE.row + TREE.nodeHeight;
  const x = (entry) => TREE.margin + entry.depth * TREE.column;
  const y = (entry) => TREE.margin + entry.row * TREE.row;
  const svg = $('lineage-svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('width', String(width));
  svg.setAttribute('height', String(height));

  const linkGroup = svgElement('g', { class: 'links' });
  for (const [from, to] of links) {
    const x1 = x(from) + TREE.nodeWidth;
    const y1 = y(from) + TREE.nodeHeight / 2;
    const x2 = x(to);
    const y2 = y(to) + TREE.nodeHeight / 2;
    const middle = (x1 + x2) / 2;
    linkGroup.append(svgElement('path', { d: `M${x1},${y1} C${middle},${y1} ${middle},${y2} ${x2},${y2}` }));
  }
  const nodeGroup = svgElement('g', { class: 'nodes' });
  for (const entry of nodes) {
    const at = `translate(${x(entry)},${y(entry)})`;
    if (entry.more !== undefined) {
      nodeGroup.append(svgElement('g', {
        class: 'node node-more', transform: at, 'data-testid': 'lineage-more', 'data-parent-id': entry.parent.agentId,
      },
      svgElement('rect', { width: TREE.nodeWidth, height: TREE.nodeHeight, rx: 8 }),
      svgElement('text', { x: 12, y: 26, class: 'node-title' }, `+${entry.more} not shown`)));
      continue;
    }
    const { node } = entry;
    const status = node.status.toLowerCase();
    const label = `Agent ${node.agentId}, generation ${node.generation}, ${node.status}, wallet ${node.wallet}`;
    nodeGroup.append(svgElement('g', {
      class: `node status-${status}`, transform: at, 'data-agent-id': node.agentId, 'data-status': node.status,
      'data-generation': node.generation,
    },
    svgElement('a', { href: `#agent=${node.agentId}`, 'aria-label': label },
      svgElement('title', {}, label),
      svgElement('rect', { width: TREE.nodeWidth, height: TREE.nodeHeight, rx: 8 }),
      svgElement('rect', { class: 'node-stripe', width: 6, height: TREE.nodeHeight, rx: 3 }),
      svgElement('text', { x: 16, y: 18, class: 'node-title' }, `#${node.agentId}`),
      svgElement('text', { x: TREE.nodeWidth - 10, y: 18, class: 'node-status', 'text-anchor': 'end' }, node.status),
      svgElement('text', { x: 16, y: 34, class: 'node-sub' }, `gen ${node.generation} · ${shortAddress(node.wallet)}`))));
  }
  svg.replaceChildren(linkGroup, nodeGroup);

  const note = $('lineage-truncation');
  note.hidden = cuts.length === 0;
  note.replaceChildren(...cuts.map((cut) => element('span', {
    className: 'cut', 'data-agent-id': cut.agentId, 'data-total': cut.total, 'data-shown': cut.shown,
  }, `Truncated: agent #${cut.agentId} has ${cut.total} children, ${cut.shown} shown ` +
     `(the API lists at most 50 per node and 15 levels).`)));
}

async function showLineage() {
  const agentId = $('show-lineage').dataset.agentId;
  const panel = $('lineage-panel');
  setPanelState(panel, 'loading');
  panel.dataset.root = agentId;
  $('lineage-title').textContent = `Lineage of agent #${agentId}`;
  try {
    const { body } = await api(`/api/v1/agent/${agentId}/lineage`);
    if (panel.dataset.root !== agentId) return;
    renderLineage(body);
    setPanelState(panel, 'ready');
    panel.scrollIntoView({ block: 'nearest' });
  } catch (error) {
    $('lineage-svg').replaceChildren();
    showError($('lineage-truncation'), `Lineage failed: ${error.message}`);
    setPanelState(panel, 'error');
  }
}

// ---------------------------------------------------------------------------------------------
// Agent list

const listState = { page: 1, status: '', totalPages: 0 };

async function loadAgents() {
  const table = $('agents-table');
  const { page, status } = listState;
  table.dataset.state = 'loading';
  table.setAttribute('aria-busy', 'true');
  const query = new URLSearchParams({ page: String(page), limit: String(PAGE_SIZE) });
  if (status) query.set('status', status);
  try {
    const { body } = await api(`/api/v1/agents?${query}`);
    if (listState.page !== page || listState.status !== status) return;
    listState.totalPages = body.totalPages;
    $('agents-body').replaceChildren(...(body.data.length === 0
      ? [element('tr', {}, element('td', { colspan: 4, className: 'muted' }, 'No agents match.'))]
      : body.data.map((item) => element('tr', { 'data-agent-id': item.agentId },
        element('td', {}, agentLink(item.agentId)),
        element('td', {}, element('code', { title: item.creator }, shortAddress(item.creator))),
        element('td', {}, statusPill(item.status)),
        element('td', {}, timeValue(item.registeredAt))))));
    const filter = status ? ` ${status}` : '';
    $('page-info').textContent = body.totalPages === 0
      ? `No${filter} agents`
      : `Page ${body.page} of ${body.totalPages} · ${body.total}${filter} agents`;
    table.dataset.page = String(body.page);
    table.dataset.status = status;
    table.dataset.state = 'ready';
  } catch (error) {
    $('agents-body').replaceChildren(element('tr', {}, element('td', { colspan: 4, className: 'field-error' },
      `Could not load agents: ${error.message}`)));
    table.dataset.state = 'error';
  }
  table.setAttribute('aria-busy', 'false');
  $('prev-page').disabled = listState.page <= 1;
  $('next-page').disabled = listState.page >= listState.totalPages;
}

// ---------------------------------------------------------------------------------------------
// Statistics chart

/** Horizontal bars: `items` are [key, label, count]; every bar carries data-key and data-count. */
function barChart(svg, items, attribute) {
  const labelWidth = 96;
  const barArea = 220;
  const rowHeight = 30;
  const max = Math.max(1, ...items.map(([, , count]) => count));
  const width = labelWidth + barArea + 48;
  const height = items.length * rowHeight + 4;
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.replaceChildren(...items.map(([key, label, count], index) => {
    const barWidth = count === 0 ? 0 : Math.max(2, (count / max) * barArea);
    const top = index * rowHeight + 4;
    return svgElement('g', { class: `bar bar-${String(key).toLowerCase()}`, [attribute]: key, 'data-count': count },
      svgElement('title', {}, `${label}: ${count}`),
      svgElement('text', { x: labelWidth - 8, y: top + 15, class: 'bar-label', 'text-anchor': 'end' }, label),
      svgElement('rect', { class: 'bar-track', x: labelWidth, y: top, width: barArea, height: 20, rx: 4 }),
      svgElement('rect', { class: 'bar-fill', x: labelWidth, y: top, width: barWidth, height: 20, rx: 4 }),
      svgElement('text', { x: labelWidth + barWidth + 6, y: top + 15, class: 'bar-value' }, String(count)));
  }));
}

async function loadStats() {
  const panel = $('stats-panel');
  panel.dataset.state = 'loading';
  try {
    const { body } = await api('/api/v1/stats/detailed');
    $('total-agents').textContent = String(body.totalAgents);
    $('compliant-count').textContent = String(body.compliantCount);
    $('compliance-rate').textContent = `${body.complianceRate}%`;
    barChart($('status-chart'),
      STATUSES.map((status) => [status, status, body.statusDistribution[status] ?? 0]), 'data-status');
    const generations = Object.keys(body.generationDistribution).map(Number).sort((a, b) => a - b);
    barChart($('generation-chart'),
      generations.map((generation) =>
        [generation, `Gen ${generation}`, body.generationDistribution[String(generation)]]),
      'data-generation');
    const revenue = Object.entries(body.totalRevenue);
    $('total-revenue').replaceChildren(...(revenue.length === 0
      ? [element('li', { className: 'muted' }, 'none reported')]
      : revenue.map(([currency, cents]) => element('li', { 'data-currency': currency },
        `${(cents / 100).toLocaleString('en-US', { minimumFractionDigits: 2 })} ${currency}`))));
    panel.dataset.state = 'ready';
  } catch (error) {
    panel.dataset.state = 'error';
    showError($('app-error'), `Statistics could not be loaded: ${error.message}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Recent changes: the last CHANGES_SHOWN events of the change feed, newest first. Seeded by
// paging /api/v1/changes to its end (the feed is oldest first and has no "newest" query), then
// followed live by an EventSource on /api/v1/changes/stream from the last page's `next`. An
// EventSource reconnects by itself and sends Last-Event-ID, so the stream resumes where it broke.

const CHANGES_SHOWN = 20;
/** At most this many pages are read to seed the panel; past that it starts from the stream. */
const CHANGES_SEED_PAGES = 20;
const CHANGES_RETRY_MS = 10_000;
const CHANGE_TYPES = [
  'agent.registered', 'agent.status_changed', 'agent.attested', 'agent.attestation_expired',
  'agent.revenue_reported', 'agent.compliance_changed', 'agent.unregistered',
];

function setChangesState(state, text) {
  const label = $('changes-state');
  label.textContent = text;
  $('changes-panel').dataset.state = state;
}

/** One event as a list item: type, finality, agent, wallet (short) and block. */
function changeItem(event) {
  const settles = event.confirms ?? event.retracts;
  return element('li', { 'data-event-id': event.id, 'data-type': event.type, 'data-finality': event.finality },
    element('span', { className: 'change-type' }, event.type),
    element('span', { className: `change-finality finality-${event.finality}` },
      settles ? `${event.finality} (${settles})` : event.finality),
    element('span', { className: 'change-meta' },
      agentLink(event.agentId, `Agent #${event.agentId}`), ' · ',
      element('code', { title: event.wallet }, shortAddress(event.wallet)), ' · ',
      `block #${event.block.number}`));
}

/** Puts `events` (oldest first) at the top of the list, keeping the newest CHANGES_SHOWN. */
function showChanges(events) {
  const list = $('changes-list');
  list.prepend(...events.map(changeItem).reverse());
  while (list.children.length > CHANGES_SHOWN) list.lastElementChild.remove();
  list.dataset.newest = list.firstElementChild?.dataset.eventId ?? '';
}

async function seedChanges() {
  let after = null;
  let recent = [];
  for (let page = 0; page < CHANGES_SEED_PAGES; page += 1) {
    const query = new URLSearchParams({ limit: '1000' });
    if (after) query.set('after', after);
    const { body } = await api(`/api/v1/changes?${query}`, { pinned: false });
    recent = recent.concat(body.events).slice(-CHANGES_SHOWN);
    after = body.next ?? after;
    if (!body.more) return { recent, after };
  }
  // A feed too long to page here: show only what the stream brings from now on.
  return { recent: [], after: null };
}

async function followChanges() {
  setChangesState('loading', 'Loading…');
  let seed;
  try {
    seed = await seedChanges();
  } catch (error) {
    // A 503 is a deployment whose index has not run yet: try again shortly.
    setChangesState('waiting', `The change feed could not be read (${error.message}); trying again.`);
    setTimeout(followChanges, CHANGES_RETRY_MS);
    return;
  }
  showChanges(seed.recent);
  const url = seed.after ? `/api/v1/changes/stream?after=${encodeURIComponent(seed.after)}` : '/api/v1/changes/stream';
  const source = new EventSource(url);
  source.addEventListener('open', () => setChangesState('live', 'Live'));
  source.addEventListener('error', () => {
    // CONNECTING: the EventSource is retrying by itself (with Last-Event-ID). CLOSED: the server
    // refused the stream (a 4xx/5xx answer), which an EventSource does not retry.
    if (source.readyState === EventSource.CLOSED) setChangesState('error', 'The change stream was refused.');
    else setChangesState('reconnecting', 'Reconnecting…');
  });
  for (const type of CHANGE_TYPES) {
    source.addEventListener(type, (message) => {
      try {
        showChanges([JSON.parse(message.data)]);
      } catch (error) {
        showError($('app-error'), `A change event could not be read: ${error.message}`);
      }
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Start

async function start() {
  try {
    await init();
  } catch (error) {
    showError($('app-error'), `The compliance engine (WebAssembly) failed to load: ${error.message}`);
    document.body.dataset.ready = 'error';
    return;
  }
  $('search-form').addEventListener('submit', onSearch);
  $('show-lineage').addEventListener('click', showLineage);
  $('status-filter').addEventListener('change', (event) => {
    listState.status = event.target.value;
    listState.page = 1;
    loadAgents();
  });
  $('prev-page').addEventListener('click', () => {
    if (listState.page > 1) {
      listState.page -= 1;
      loadAgents();
    }
  });
  $('next-page').addEventListener('click', () => {
    if (listState.page < listState.totalPages) {
      listState.page += 1;
      loadAgents();
    }
  });
  window.addEventListener('hashchange', route);
  document.body.dataset.ready = 'true';
  route();
  await Promise.all([loadAgents(), loadStats(), followChanges()]);
}

start();
