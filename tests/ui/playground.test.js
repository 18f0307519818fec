// Playground and calls: call tools from a generated form and see the envelope (a call that
// needs approval waits, then shows its result live); the audit log with filters and a call's
// detail, including an output stored apart from the log.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { serverAndBrowser, checkA11y, screenshot, waitForHeading, rest, eventually } from './lib/harness.js';

const env = serverAndBrowser();

test('call tools from the playground', async () => {
  const { page } = env.browser;
  await page.goto(`${env.server.url}#/playground`);
  await waitForHeading(page, 'Playground');
  await checkA11y(page, 'playground (no tool)');
  await page.getByLabel('Tool', { exact: true }).selectOption('calculator');
  await page.locator('#arg-expression').waitFor();
  await page.getByLabel(/^expression/).fill('sqrt(16) * (2 + 8.5)');
  await page.getByRole('button', { name: 'Call calculator' }).click();
  const outcome = page.locator('#pg-outcome');
  await outcome.getByText('Succeeded').waitFor();
  assert.match(await page.locator('#pg-result pre').textContent(), /"result": 42/);
  await checkA11y(page, 'playground with a result');
  await screenshot(page, 'playground');

  // A failure is an envelope too.
  await page.getByLabel(/^expression/).fill('1 +');
  await page.getByRole('button', { name: 'Call calculator' }).click();
  await outcome.getByText(/Failed/).waitFor();

  // A required argument left empty is caught before calling.
  await page.getByLabel(/^expression/).fill('');
  await page.getByRole('button', { name: 'Call calculator' }).click();
  await page.locator('#arg-expression-error', { hasText: 'expression is required.' }).waitFor();

  // A tool that needs a yes: the playground waits, then shows the result once approved.
  await page.getByLabel('Tool', { exact: true }).selectOption('write_file');
  await page.locator('#arg-path').waitFor();
  await page.getByLabel(/^path/).fill('hello.txt');
  await page.getByLabel(/^content/).fill('hello from the playground');
  await page.getByLabel('Reason (optional)').fill('Playground test');
  await page.getByRole('button', { name: 'Call write_file' }).click();
  await page.getByRole('heading', { name: 'Waiting for approval' }).waitFor();
  const pending = await rest(env.server, 'GET', '/v1/approvals?status=pending');
  assert.equal(pending.json.approvals.length, 1);
  assert.equal(pending.json.approvals[0].reason, 'Playground test');
  await rest(env.server, 'POST', `/v1/approvals/${pending.json.approvals[0].id}/approve`, {});
  await page.getByRole('heading', { name: /Result \(approved by api:local\)/ }).waitFor();
  await outcome.getByText('Succeeded').waitFor();
  assert.deepEqual(env.browser.problems, []);
});

test('the audit log: filters and a call with a stored output', async () => {
  const { page } = env.browser;
  writeFileSync(join(env.server.root, 'big.txt'), 'toolgate '.repeat(3000));
  const big = await rest(env.server, 'POST', '/v1/tools/read_file/call', { arguments: { path: 'big.txt' } });
  assert.ok(big.json.outputRef, big.text);
  await rest(env.server, 'POST', '/v1/tools/calculator/call', { arguments: { expression: '2**' } });

  await page.goto(`${env.server.url}#/calls`);
  await waitForHeading(page, 'Calls');
  await page.locator('#calls-table tbody tr').first().waitFor();
  await checkA11y(page, 'calls');
  await screenshot(page, 'calls');
  await page.getByLabel('Outcome').selectOption('error');
  await eventually(async () => {
    const rows = await page.locator('#calls-table tbody tr').allTextContents();
    return rows.length > 0 && rows.every((r) => !/\bok\b/.test(r));
  }, 'only failed calls');
  await page.getByLabel('Outcome').selectOption('');
  await page.getByLabel('Tool').selectOption('read_file');
  await eventually(async () => (await page.locator('#calls-table tbody tr').count()) === 1, 'one read_file call');
  await page.getByLabel('Principal').fill('nobody');
  await page.getByText('No call matches these filters.').waitFor();
  await page.getByLabel('Principal').fill('local');
  await page.locator('#calls-table tbody tr').first().waitFor();

  await page.locator('#calls-table tbody tr a').first().click();
  await waitForHeading(page, 'Call to read_file');
  await page.getByText('stored apart').waitFor();
  // Where the call came from: REST (the harness names no client).
  await page.getByText('Came from').waitFor();
  await page.getByText('REST', { exact: true }).waitFor();
  await page.getByRole('button', { name: 'Show stored output' }).click();
  await page.locator('#stored-output pre', { hasText: 'toolgate toolgate' }).waitFor();
  await page.getByRole('link', { name: 'Download' }).waitFor();
  await checkA11y(page, 'call detail');
  await screenshot(page, 'call-detail');
  assert.deepEqual(env.browser.problems, []);
});
