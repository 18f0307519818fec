// The approvals inbox: pending calls as confirmation cards; approve one and deny another from
// the inbox and see the results; the list follows approvals created or decided elsewhere live.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { serverAndBrowser, checkA11y, screenshot, waitForHeading, rest, eventually } from './lib/harness.js';

const env = serverAndBrowser();

async function pendingWrite(path, content, reason) {
  const r = await rest(env.server, 'POST', '/v1/tools/write_file/call', { arguments: { path, content }, reason });
  assert.equal(r.status, 202, r.text);
  return r.json.approval.id;
}

test('approve one pending call and deny another from the inbox', async () => {
  const { page } = env.browser;
  await pendingWrite('release-notes.md', '# 1.4.0\n\nFaster search.', 'Publish the release notes');
  await pendingWrite('config.toml', 'debug = true', 'Turn on debug logging');

  await page.goto(`${env.server.url}#/approvals`);
  await waitForHeading(page, 'Approvals');
  const cards = page.locator('#pending-list .approval-card');
  await eventually(async () => (await cards.count()) === 2, 'two cards');
  const first = cards.filter({ hasText: 'release-notes.md' });
  // The card says what runs, how much is at stake, who asked and why, and when it expires.
  await first.getByRole('heading', { name: 'Run write_file?' }).waitFor();
  await first.getByText('medium consequence').waitFor();
  await first.getByText('Publish the release notes').waitFor();
  // … and where the call came from (here REST, without a client name).
  await first.getByText('Came from').waitFor();
  await first.getByText('REST', { exact: true }).waitFor();
  await first.getByText(/in 2[34] h/).waitFor();
  assert.match(await first.locator('pre').textContent(), /"content": "# 1.4.0/);
  await page.locator('#pending-count', { hasText: '2' }).waitFor();
  await page.locator('#live-state', { hasText: 'on' }).waitFor();
  await checkA11y(page, 'approvals inbox');
  await screenshot(page, 'approvals');

  await first.getByLabel('Reason for your decision (optional)').fill('Checked the text');
  await first.getByRole('button', { name: 'Approve' }).click();
  const executed = page.locator('#decided-table tr[data-status="executed"]');
  await executed.waitFor();
  await executed.getByText('Checked the text').waitFor();
  await executed.getByText('ok', { exact: true }).waitFor();
  assert.equal(readFileSync(join(env.server.root, 'release-notes.md'), 'utf8'), '# 1.4.0\n\nFaster search.');

  const second = cards.filter({ hasText: 'config.toml' });
  await second.getByLabel('Reason for your decision (optional)').fill('Not on production');
  await second.getByRole('button', { name: 'Deny' }).click();
  const denied = page.locator('#decided-table tr[data-status="denied"]');
  await denied.waitFor();
  await denied.getByText('Not on production').waitFor();
  await page.getByText('Nothing is waiting for a decision.').waitFor();
  assert.ok(!existsSync(join(env.server.root, 'config.toml')), 'a denied call never runs');
  await page.locator('#pending-count').waitFor({ state: 'hidden' });
  await checkA11y(page, 'approvals after decisions');

  // Arrives live (SSE) and leaves live when someone else decides it.
  const id = await pendingWrite('later.txt', 'later', 'From another client');
  const live = cards.filter({ hasText: 'later.txt' });
  await live.waitFor();
  await page.locator('#pending-count', { hasText: '1' }).waitFor();
  const r = await rest(env.server, 'POST', `/v1/approvals/${id}/deny`, { reason: 'decided over REST' });
  assert.equal(r.status, 200, r.text);
  await live.waitFor({ state: 'detached' });
  await page.locator('#decided-table tr[data-status="denied"]', { hasText: 'decided over REST' }).waitFor();
  await eventually(async () => (await page.locator('#announcer').textContent()).includes('decided elsewhere'), 'the announcement');
  assert.deepEqual(env.browser.problems, []);
});
