// Test harness for the web UI: a real `toolgate serve` per test (fresh SQLite database, a temp
// root for the file tools), Debian's Chromium driven by playwright-core (no downloaded
// browsers), axe-core checks, screenshots, and a small MCP client.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';
import { before, after } from 'node:test';

const here = dirname(fileURLToPath(import.meta.url));
export const repo = resolve(here, '..', '..', '..');
// Screenshots go to target/ui-screenshots; UPDATE_SCREENSHOTS=1 writes the committed ones in
// docs/screenshots instead (they carry timestamps and ids, so every run would change them).
export const screenshotsDir = process.env.UPDATE_SCREENSHOTS === '1'
  ? join(repo, 'docs', 'screenshots')
  : join(repo, 'target', 'ui-screenshots');
const binary = process.env.TOOLGATE_BIN
  || join(process.env.CARGO_TARGET_DIR || join(repo, 'target'), 'debug', 'toolgate');
const chromiumPath = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const axeSource = readFileSync(join(here, '..', 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

/** sha256 hex of a token, as `[principals.X] token_sha256` wants it. */
export function tokenHash(token) {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * Starts `toolgate serve --http 127.0.0.1:0` and waits for its banner. `config` (TOML text) is
 * written next to the database and passed with --config. Returns {url, dir, root, stop()}.
 */
export async function startServer({ config } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'toolgate-ui-'));
  const root = join(dir, 'root');
  mkdirSync(root);
  const args = ['--db', `sqlite:${join(dir, 't.db')}`, '--root', root];
  if (config) {
    writeFileSync(join(dir, 'toolgate.toml'), config);
    args.push('--config', join(dir, 'toolgate.toml'));
  }
  args.push('serve', '--http', '127.0.0.1:0', '--grace', '1');
  const env = { ...process.env, XDG_DATA_HOME: dir, TOOLGATE_LOG: 'warn' };
  for (const k of ['TOOLGATE_DB', 'TOOLGATE_CONFIG', 'RUST_LOG']) delete env[k];
  const child = spawn(binary, args, { cwd: dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
  const log = [];
  const url = await new Promise((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`toolgate serve did not start:\n${log.join('\n')}`)), 30000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`toolgate serve exited with ${code}:\n${log.join('\n')}`));
    });
    createInterface({ input: child.stderr }).on('line', (line) => {
      log.push(line);
      const m = /web UI (http:\/\/[^ ]+\/)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]);
      }
    });
  });
  child.removeAllListeners('exit');
  return {
    url,
    dir,
    root,
    log,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Chromium with a fresh profile, 1280x800. Fails the test on page errors and CSP reports. */
// The usual test file's fixture: one server (started with `options`, as `startServer` takes
// them) and one browser for all its tests, both stopped at the end. Read `env.server` and
// `env.browser` inside tests; they are set once `before` has run.
export function serverAndBrowser(options) {
  const env = {};
  before(async () => {
    env.server = await startServer(options);
    env.browser = await openBrowser();
  });
  after(async () => {
    await env.browser?.close();
    await env.server?.stop();
  });
  return env;
}

export async function openBrowser() {
  const profile = mkdtempSync(join(tmpdir(), 'toolgate-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1280, height: 800 },
    deviceScaleFactor: 1,
    locale: 'en-GB',
    timezoneId: 'UTC',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage'],
  });
  context.setDefaultTimeout(15000);
  const problems = [];
  const page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (msg) => {
    const text = msg.text();
    if (/Content Security Policy|Refused to/.test(text)) problems.push(`CSP: ${text}`);
  });
  return {
    context,
    page,
    problems,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Every axe run of this process: {label, url, violations by impact}. */
export const axeRuns = [];

/** Runs axe-core on the page; throws on serious or critical violations. */
export async function checkA11y(page, label) {
  // Evaluated through the DevTools protocol, so the page's CSP (no inline script) is untouched.
  await page.evaluate(axeSource);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }));
  });
  const counts = { critical: 0, serious: 0, moderate: 0, minor: 0 };
  for (const v of result) counts[v.impact] = (counts[v.impact] || 0) + 1;
  axeRuns.push({ label, counts, violations: result });
  // scripts/ui-e2e.sh collects every run of every test file here for its summary.
  if (process.env.AXE_REPORT) {
    appendFileSync(process.env.AXE_REPORT, `${JSON.stringify({ label, counts, violations: result.map((v) => `${v.impact} ${v.id}`) })}\n`);
  }
  const bad = result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const others = result.filter((v) => !bad.includes(v));
  console.log(`axe ${label}: ${result.length === 0 ? 'no violations' : result.map((v) => `${v.impact} ${v.id}`).join(', ')}`);
  if (others.length) console.log(`  (not failing: ${others.map((v) => `${v.id}: ${v.help}`).join('; ')})`);
  if (bad.length) {
    throw new Error(`axe found serious/critical violations on ${label}:\n${bad.map((v) => `- ${v.impact} ${v.id}: ${v.help} at ${v.nodes.join(', ')}`).join('\n')}`);
  }
}

/**
 * Saves docs/screenshots/NAME.png (the 1280x800 viewport), scrolled to the top or so that
 * `scrollTo` (a selector) is in the middle; notices that come and go are left out.
 */
export async function screenshot(page, name, { scrollTo } = {}) {
  mkdirSync(screenshotsDir, { recursive: true });
  await page.evaluate((sel) => {
    document.activeElement?.blur?.();
    document.getElementById('toasts')?.replaceChildren();
    const target = sel && document.querySelector(sel);
    if (target) target.scrollIntoView({ block: 'center' });
    else window.scrollTo(0, 0);
  }, scrollTo || null);
  await page.waitForTimeout(150);
  await page.screenshot({ path: join(screenshotsDir, `${name}.png`), animations: 'disabled', caret: 'hide' });
}

/** Waits until the page shows a heading with this text. */
export async function waitForHeading(page, text) {
  await page.getByRole('heading', { level: 1, name: text }).waitFor();
}

/** A REST call from Node (not through the browser). */
export async function rest(server, method, path, body, token) {
  const headers = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const r = await fetch(new URL(path, server.url), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { json = null; }
  return { status: r.status, json, text };
}

/** A minimal MCP Streamable HTTP client: initialize, then tools/list; returns the tool names. */
export async function mcpToolNames(server) {
  const url = new URL('/mcp', server.url);
  const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  async function rpc(body, session) {
    const headers = { ...base };
    if (session) {
      headers['mcp-session-id'] = session;
      headers['mcp-protocol-version'] = '2025-11-25';
    }
    const r = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
    const text = await r.text();
    let message = null;
    if ((r.headers.get('content-type') || '').includes('text/event-stream')) {
      for (const line of text.split('\n')) {
        if (line.startsWith('data:')) {
          const data = line.slice(5).trim();
          if (data) {
            const parsed = JSON.parse(data);
            if (parsed.id === body.id) message = parsed;
          }
        }
      }
    } else if (text) {
      message = JSON.parse(text);
    }
    return { message, session: r.headers.get('mcp-session-id'), status: r.status };
  }
  const init = await rpc({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'ui-e2e', version: '1' } } });
  const session = init.session;
  await rpc({ jsonrpc: '2.0', method: 'notifications/initialized' }, session);
  const names = [];
  let cursor;
  for (let i = 0; i < 20; i += 1) {
    const list = await rpc({ jsonrpc: '2.0', id: 2 + i, method: 'tools/list', params: cursor ? { cursor } : {} }, session);
    for (const t of list.message.result.tools) names.push(t.name);
    cursor = list.message.result.nextCursor;
    if (!cursor) break;
  }
  return names;
}

/** Polls fn until it returns a truthy value. */
export async function eventually(fn, what, timeoutMs = 10000) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}
