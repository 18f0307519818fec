// The Servers view against a real upstream: the Python MCP fixture (official `mcp` SDK) declared
// in the config file. Its tools are withheld at first sight until approved from the server's
// page (an explicit "I reviewed it" first); when a tool's description changes upstream (a rug
// pull), the page shows the approved and the new description side by side until approved again.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serverAndBrowser, checkA11y, screenshot, waitForHeading, rest, eventually, repo } from './lib/harness.js';

const python = process.env.TOOLGATE_TEST_PYTHON ?? join(repo, 'target', 'interop-venv', 'bin', 'python');
const available = python !== '' && existsSync(python);
if (!available && process.env.CI === 'true') {
  throw new Error(`the Servers UI test needs the Python MCP SDK at ${python}: run scripts/mcp-test-deps.sh (scripts/test.sh does)`);
}
const scratch = mkdtempSync(join(tmpdir(), 'toolgate-ui-servers-'));
const drift = join(scratch, 'drift');
const toml = (s) => JSON.stringify(s);
const env = available ? serverAndBrowser({
  config: [
    '[servers.py]',
    `command = ${toml(python)}`,
    `args = [${toml(join(repo, 'crates', 'gateway', 'tests', 'fixtures', 'py_server.py'))}]`,
    `env = { PY_SERVER_DRIFT_FILE = ${toml(drift)} }`,
    // The sandbox levels are the gateway's tests'; the venv may sit where its user cannot read.
    'isolation = "none"',
    'eager = true',
    '',
  ].join('\n'),
}) : null;

async function approveFromCard(page, tool) {
  const card = page.locator(`#review-list .review-card[data-tool="${tool}"]`);
  const button = card.getByRole('button', { name: /^Approve/ });
  // Nothing is approved by a stray click: the button waits for the explicit yes.
  assert.equal(await button.isDisabled(), true);
  await card.getByRole('checkbox').check();
  await button.click();
  await card.waitFor({ state: 'detached' });
}

test('approve a new server\'s tools, then review and approve a changed description', { skip: !available && 'no Python MCP SDK (run scripts/mcp-test-deps.sh)' }, async () => {
  const { page } = env.browser;
  await page.goto(`${env.server.url}#/servers`);
  await waitForHeading(page, 'Servers');
  const row = page.locator('#servers-table tr[data-server="py"]');
  await row.waitFor();
  // eager: it starts with toolgate; a Python interpreter on a busy machine may take a while.
  await eventually(async () => /ready/.test(await row.textContent()), 'the server is ready', 30000);
  await page.locator('#servers-waiting').waitFor();
  await checkA11y(page, 'servers list');
  await screenshot(page, 'servers');

  await row.getByRole('link', { name: 'py' }).click();
  await waitForHeading(page, 'Server py');
  await page.locator('#review-list .review-card[data-tool="drifting"]').waitFor();
  await approveFromCard(page, 'drifting');
  await approveFromCard(page, 'echo');
  let tools = await rest(env.server, 'GET', '/v1/servers/py/tools');
  const status = (name) => tools.json.tools.find((t) => t.upstreamName === name)?.status;
  assert.equal(status('drifting'), 'approved', tools.text);
  assert.equal(status('echo'), 'approved', tools.text);

  // The rug pull: the same server now describes `drifting` differently.
  writeFileSync(drift, 'x');
  const restart = await rest(env.server, 'POST', '/v1/servers/py/restart');
  assert.equal(restart.status, 200, restart.text);
  await page.reload();
  await waitForHeading(page, 'Server py');
  const card = page.locator('#review-list .review-card[data-tool="drifting"]');
  await card.getByRole('heading', { name: /drifting changed since it was approved/ }).waitFor();
  const diff = card.locator('.diff[data-field="description"]');
  assert.match(await diff.locator('.diff-old pre').textContent(), /Harmless/);
  assert.match(await diff.locator('.diff-new pre').textContent(), /id_rsa/);
  await checkA11y(page, 'server review with a changed tool');
  await screenshot(page, 'server-review');
  tools = await rest(env.server, 'GET', '/v1/servers/py/tools');
  assert.equal(status('drifting'), 'quarantined', tools.text);

  await approveFromCard(page, 'drifting');
  tools = await rest(env.server, 'GET', '/v1/servers/py/tools');
  assert.equal(status('drifting'), 'approved', tools.text);
  rmSync(scratch, { recursive: true, force: true });
});
