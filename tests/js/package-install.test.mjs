// kya-core's npm package as a new user gets it. `npm pack` of core/pkg/ (built by
// scripts/build-core-wasm.sh) makes the versioned tarball; it is installed into a fresh temporary
// project (a copy of tests/js/package-consumer/), where:
//   1. tsc --noEmit type-checks a TypeScript consumer using every export with its real types, and
//      docs/dropping-sessions.md's JavaScript sample;
//   2. Node imports the package by name (ESM) and runs the checks of checks.js;
//   3. esbuild bundles a page importing it, which headless Chromium loads and runs the same checks.
// Digests (forward requests and consents) are compared with viem's, compliance with values worked
// out here from the fixtures, and an ERC-8128 request signed with the defaults (the runtime's clock
// and crypto.getRandomValues) must verify to the key's address as viem derives it.
// Run by the Rust end-to-end test `core_package` (offline: the tarball has no dependencies).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { privateKeyToAccount } from 'viem/accounts';

import {
  AGENT_KEY, CHAIN_ID, CONSENT_DEADLINE, CONSENT_NONCES, FORWARDER, REGISTRY, parties, records, requests,
} from './package-consumer/checks.js';
import { viemConsentDigest, viemDigest } from './viem-digest.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const bin = (name) => path.join(root, 'node_modules/.bin', name);
let work;
let app;

/** Runs a command in `cwd`, failing with its output when it fails. */
function run(command, args, cwd) {
  try {
    return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    throw new Error(`${command} ${args.join(' ')} failed:\n${error.stdout}${error.stderr}`);
  }
}

before(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'kya-core-package-'));
  const [packed] = JSON.parse(run('npm', ['pack', path.join(root, 'core/pkg'), '--pack-destination', work, '--json'], root));
  const cargoVersion = /^version = "([^"]+)"/m.exec(await readFile(path.join(root, 'Cargo.toml'), 'utf8'))[1];
  assert.equal(packed.filename, `kya-core-${cargoVersion}.tgz`, 'the tarball carries the crate version');
  assert.deepEqual(packed.files.map((file) => file.path).sort(), [
    'README.md', 'changes.d.ts', 'changes.js', 'kya_core.d.ts', 'kya_core.js', 'kya_core_bg.wasm', 'kya_core_bg.wasm.d.ts', 'node.js', 'package.json',
  ]);
  app = path.join(work, 'app');
  await cp(path.join(root, 'tests/js/package-consumer'), app, { recursive: true });
  await addPageSample(app);
  run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', path.join(work, packed.filename)], app);
});

/**
 * docs/dropping-sessions.md's JavaScript sample, type-checked with the consumer (its helpers
 * declared as a provider would write them), so the page cannot drift from the package's types.
 */
async function addPageSample(dir) {
  const page = await readFile(path.join(root, 'docs/dropping-sessions.md'), 'utf8');
  const sample = /```js\n([\s\S]*?)```/.exec(page)?.[1];
  assert.ok(sample, 'docs/dropping-sessions.md has a js block');
  const helpers = [
    'declare function loadPosition(): Promise<string | undefined>;',
    'declare function savePosition(id: string): Promise<void>;',
    'declare function dropSessions(wallet: string): Promise<void>;',
  ].join('\n');
  await writeFile(path.join(dir, 'dropping-sessions.ts'), `${sample}\n${helpers}\n`);
  const tsconfig = JSON.parse(await readFile(path.join(dir, 'tsconfig.json'), 'utf8'));
  tsconfig.files.push('dropping-sessions.ts');
  await writeFile(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
}

after(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});


/** SPEC.md's compliance rules written out here, independent of the package. */
function expected() {
  const compliance = records.map(([record, { time, gracePeriod }, childCount]) => {
    const attested = record.lastAttestation === null ? 0 : Date.parse(record.lastAttestation) / 1000;
    const seconds = Math.max(0, time - attested);
    const isActive = record.status === 'Active';
    // Current while at most the registry's grace period old (INTERFACE.md section 2).
    const attestationCurrent = seconds <= gracePeriod;
    return {
      isActive, attestationCurrent, secondsSinceAttestation: seconds, childCount, status: record.status,
      isCompliant: isActive && attestationCurrent,
    };
  });
  const badges = compliance.map((c) => {
    if (c.status !== 'Active') return c.status.toLowerCase();
    return c.attestationCurrent ? 'compliant' : 'lapsed';
  });
  // The two consents the registration needs, written out here from INTERFACE.md section 5.
  const [walletNonce, personNonce] = CONSENT_NONCES.map(String);
  const deadline = String(CONSENT_DEADLINE);
  const consents = [
    { primaryType: 'AgentWalletConsent', agentWallet: parties.agentWallet, creator: parties.creator, parentAgentId: '0', nonce: walletNonce, deadline },
    { primaryType: 'LiabilityConsent', haftungsperson: parties.haftungsperson, creator: parties.creator, agentWallet: parties.agentWallet, nonce: personNonce, deadline },
  ].map((consent) => ({ consent, digest: viemConsentDigest(consent.primaryType, consent, CHAIN_ID, REGISTRY) }));
  const signedRequest = {
    outcome: 'verified', signer: privateKeyToAccount(AGENT_KEY).address, window: 60, randomNonce: true, tampered: 'digest_mismatch',
  };
  return { signedRequest, digests: requests.map((request) => viemDigest(request, CHAIN_ID, FORWARDER)), consents, compliance, badges };
}

function assertResults(results) {
  const want = expected();
  assert.deepEqual(results.signedRequest, want.signedRequest, 'a signed request verifies to its key');
  assert.deepEqual(results.digests, want.digests, 'digests equal viem');
  assert.deepEqual(results.consents, want.consents, 'the consents needed, and their digests equal viem');
  assert.deepEqual(results.compliance, want.compliance);
  assert.deepEqual(results.badges, want.badges);
  assert.deepEqual([...new Set(results.badges)].sort(), ['compliant', 'lapsed', 'revoked', 'suspended', 'terminated']);
}

test('a TypeScript consumer of every export type-checks against the installed package', () => {
  // Fails on any type error, and on an @ts-expect-error that no longer errs (types gone loose).
  run(bin('tsc'), ['-p', 'tsconfig.json'], app);
});

test('Node imports the installed package by name and agrees with viem', () => {
  assertResults(JSON.parse(run(process.execPath, ['node.mjs'], app)));
});

test('a page bundled with esbuild runs the package in headless Chromium and agrees with viem', async () => {
  run(bin('esbuild'), ['page.js', '--bundle', '--format=esm', '--loader:.wasm=file', '--outdir=dist', '--log-level=warning'], app);
  const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' };
  const server = http.createServer(async (request, response) => {
    const name = request.url === '/' ? 'index.html' : path.posix.normalize(request.url).replace(/^\/+/, '');
    const file = name === 'index.html' ? path.join(app, name) : path.join(app, 'dist', name);
    try {
      const body = await readFile(file);
      response.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream' });
      response.end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const userDataDir = await mkdtemp(path.join(tmpdir(), 'kya-core-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    const errors = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`http://127.0.0.1:${server.address().port}/`);
    await page.waitForSelector('body[data-ready]');
    const text = await page.locator('#results').innerText();
    assert.equal(await page.locator('body').getAttribute('data-ready'), 'true', text);
    assert.deepEqual(errors, []);
    assertResults(JSON.parse(text));
  } finally {
    await context.close();
    server.close();
    await rm(userDataDir, { recursive: true, force: true });
  }
});
