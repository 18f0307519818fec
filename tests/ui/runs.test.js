// Runs: the list of the principal's runs with their consumption against the budget (turns, tool
// calls, failures per tool, wall time), reached and opened with the keyboard alone, and a run's
// detail with the calls counted against it, each linking to its audit entry.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { serverAndBrowser, checkA11y, screenshot, waitForHeading, rest, eventually } from './lib/harness.js';

const env = serverAndBrowser();

async function startRun(budget) {
  const r = await rest(env.server, 'POST', '/v1/runs', { budget });
  assert.equal(r.status, 201, r.text);
  return r.json.id;
}

async function readUnder(run, path) {
  return rest(env.server, 'POST', '/v1/tools/read_file/call', { arguments: { path }, run });
}

test('the runs list shows consumption and opens a run with its calls, by keyboard', async () => {
  const { page } = env.browser;
  writeFileSync(join(env.server.root, 'notes.txt'), 'meeting at ten');

  // Before any run: the page says what a run is and how to start one.
  await page.goto(`${env.server.url}#/runs`);
  await waitForHeading(page, 'Runs');
  await page.getByText('No runs yet.').waitFor();
  await checkA11y(page, 'runs empty');

  // A run that read one file, failed twice on a missing one (its attempts per tool: 2) and
  // reported one model turn; another run, finished without a call.
  const busy = await startRun({ max_turns: 4, max_tool_calls: 5, max_attempts_per_tool: 2, timeout_ms: 600000 });
  assert.equal((await readUnder(busy, 'notes.txt')).status, 200);
  for (let i = 0; i < 2; i += 1) {
    const missing = await readUnder(busy, 'missing.txt');
    assert.ok(missing.json?.errorKind, missing.text);
  }
  assert.equal((await rest(env.server, 'POST', `/v1/runs/${busy}/turns`)).status, 200);
  const done = await startRun({ max_tool_calls: 1 });
  assert.equal((await rest(env.server, 'POST', `/v1/runs/${done}/finish`)).status, 200);

  await page.goto(`${env.server.url}#/tools`);
  await waitForHeading(page, 'Tools');
  // The navigation has Runs; reach it with Tab and open it with Enter.
  for (let i = 0; i < 30; i += 1) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(() => document.activeElement.textContent) === 'Runs') break;
  }
  await page.keyboard.press('Enter');
  await waitForHeading(page, 'Runs');
  // Focus moves to the heading once the page has drawn.
  await eventually(async () => (await page.evaluate(() => document.activeElement.tagName)) === 'H1', 'focus on the heading');
  await page.locator('#runs-count', { hasText: '2 runs' }).waitFor();

  const busyRow = page.locator(`#runs-table tr[data-run="${busy}"]`);
  assert.equal(await busyRow.getAttribute('data-status'), 'open');
  const cells = await busyRow.locator('td').allTextContents();
  // Status, started, turns, tool calls, failures per tool, elapsed against the timeout.
  assert.equal(cells[0], 'open');
  assert.equal(cells[2], '1 of 4');
  assert.equal(cells[3], '3 of 5');
  assert.equal(cells[4], 'read_file 2 of 2');
  assert.match(cells[5], / of 600\.00 s$/);
  const doneRow = page.locator(`#runs-table tr[data-run="${done}"]`);
  const doneCells = await doneRow.locator('td').allTextContents();
  assert.equal(doneCells[0], 'finished');
  assert.equal(doneCells[2], '0 (no limit)');
  assert.equal(doneCells[3], '0 of 1');
  assert.equal(doneCells[4], 'none');
  assert.equal(doneCells[5], 'closed');
  await checkA11y(page, 'runs list');
  await screenshot(page, 'runs');

  // A call counted while the page is open shows up without a reload (the event stream).
  await page.locator('#live-state', { hasText: 'on' }).waitFor();
  // (read_file is refused in this run now, after its two failures; another tool still runs.)
  const sum = await rest(env.server, 'POST', '/v1/tools/calculator/call', { arguments: { expression: '17*23' }, run: busy });
  assert.equal(sum.json?.data?.result, 391, sum.text);
  await eventually(async () => (await busyRow.locator('td').nth(3).textContent()) === '4 of 5', 'the new call counted');

  // Tab to the busy run's link and open it with Enter.
  for (let i = 0; i < 60; i += 1) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((id) => document.activeElement?.closest('tr')?.dataset.run === id, busy)) break;
  }
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), `Run ${busy}`);
  await page.keyboard.press('Enter');
  await waitForHeading(page, `Run ${busy}`);
  await page.getByRole('region', { name: 'Summary' }).getByText('local', { exact: true }).waitFor();

  const budget = page.locator('#run-budget');
  assert.equal(await budget.locator('tr[data-budget="Turns"] td').first().textContent(), '1 of 4');
  assert.equal(await budget.locator('tr[data-budget="Tool calls"] td').first().textContent(), '4 of 5');
  assert.equal(await budget.getByRole('meter', { name: 'Tool calls used' }).getAttribute('value'), '4');
  assert.match(await budget.locator('tr[data-budget="Elapsed"] td').first().textContent(), / of 600\.00 s$/);
  assert.equal(await page.locator('#run-failures tr[data-tool="read_file"] td').first().textContent(), '2 of 2 (refused from now on)');

  // The calls counted against the run, in order, each a link to its audit entry.
  const calls = page.locator('#run-calls-table tbody tr');
  assert.equal(await calls.count(), 4);
  const outcomes = await page.locator('#run-calls-table tbody tr td:nth-child(3)').allTextContents();
  assert.deepEqual(outcomes, ['ok', 'failed', 'failed', 'ok']);
  assert.equal(await page.locator('#run-calls-table tbody tr th').nth(3).textContent(), 'calculator');
  await checkA11y(page, 'run detail');
  await screenshot(page, 'run-detail');

  await calls.nth(1).getByRole('link').click();
  await waitForHeading(page, 'Call to read_file');

  // Another principal's run, or one that does not exist, is not found.
  await page.goto(`${env.server.url}#/runs/00000000-0000-7000-8000-000000000000`);
  await page.getByRole('alert').filter({ hasText: 'Run not found' }).waitFor();
  await checkA11y(page, 'run not found');
  assert.deepEqual(env.browser.problems, []);
});
