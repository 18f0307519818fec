// The create-definition flow with the keyboard alone: Tab to move, typing, arrow keys in the
// category dropdown, Space for the checkbox, Enter for buttons. No mouse, no clicks.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serverAndBrowser, checkA11y, waitForHeading, rest } from './lib/harness.js';

const env = serverAndBrowser();

/** Presses Tab (or Shift+Tab) until the element with this id has focus. */
async function tabTo(page, id, { back = false, max = 60 } = {}) {
  for (let i = 0; i < max; i += 1) {
    if (await page.evaluate(() => document.activeElement?.id) === id) return i;
    await page.keyboard.press(back ? 'Shift+Tab' : 'Tab');
  }
  throw new Error(`Tab never reached #${id}`);
}

const focused = (page) => page.evaluate(() => document.activeElement?.id || document.activeElement?.textContent);

test('create a definition with the keyboard only', async () => {
  const { page } = env.browser;
  await page.goto(`${env.server.url}#/tools`);
  await waitForHeading(page, 'Tools');
  // From the top of the page: the skip link comes first, then the navigation.
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Skip to content');
  // Reach "New definition" and open it with Enter.
  for (let i = 0; i < 30; i += 1) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(() => document.activeElement.textContent) === 'New definition') break;
  }
  await page.keyboard.press('Enter');
  await waitForHeading(page, 'New tool definition');
  // Focus moved to the page heading.
  assert.equal(await page.evaluate(() => document.activeElement.tagName), 'H1');

  await tabTo(page, 'f-name');
  await page.keyboard.type('Search-Docs');
  await page.locator('#f-name-error', { hasText: 'snake_case' }).waitFor();
  await page.keyboard.press('Control+A');
  await page.keyboard.type('search_docs');
  await page.locator('#f-name-error').waitFor({ state: 'hidden' });

  // The category dropdown with arrow keys.
  await page.keyboard.press('Tab');
  assert.equal(await focused(page), 'f-category');
  assert.equal(await page.locator('#f-category').inputValue(), 'system');
  for (let i = 0; i < 10 && await page.locator('#f-category').inputValue() !== 'knowledge'; i += 1) {
    await page.keyboard.press('ArrowUp');
  }
  assert.equal(await page.locator('#f-category').inputValue(), 'knowledge');

  await page.keyboard.press('Tab');
  assert.equal(await focused(page), 'f-description');
  await page.keyboard.type('Searches the internal documentation and returns the best matching pages with a snippet each.');

  // Add two parameters with Enter; focus lands in the new row; remove the second with Enter.
  await tabTo(page, 'add-param');
  await page.keyboard.press('Enter');
  assert.match(await page.locator('#params-live').textContent(), /Parameter 1 added/);
  const first = await focused(page);
  assert.match(first, /^p-\d+-name$/);
  await page.keyboard.type('query');
  await page.keyboard.press('Tab'); // type
  await page.keyboard.press('Tab'); // description
  await page.keyboard.type('What to look for');
  await page.keyboard.press('Tab'); // required
  await page.keyboard.press('Space');
  assert.equal(await page.locator('#param-list li').first().getByLabel('Required').isChecked(), true);
  await tabTo(page, 'add-param');
  await page.keyboard.press('Enter');
  assert.match(await page.locator('#params-live').textContent(), /Parameter 2 added/);
  await page.keyboard.type('limit');
  await page.keyboard.press('Tab'); // type select
  for (let i = 0; i < 3; i += 1) await page.keyboard.press('ArrowDown'); // string → integer
  await page.keyboard.press('Tab'); // description
  await page.keyboard.press('Tab'); // required
  await page.keyboard.press('Tab'); // remove
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'Remove parameter 2 (limit)');
  await page.keyboard.press('Enter');
  assert.equal(await page.locator('#params-live').textContent(), 'Parameter limit removed. 1 parameter left.');
  assert.equal(await focused(page), first, 'focus goes back to the remaining parameter');

  // The JSON editor: typing, live validation.
  await tabTo(page, 'f-output-schema');
  await page.keyboard.type('{"type": "object", "properties": {"pages": {"type": "array"}}');
  await page.locator('#f-output-schema-error', { hasText: 'Invalid JSON' }).waitFor();
  await page.keyboard.type('}');
  await page.locator('#f-output-schema-status', { hasText: 'Valid JSON.' }).waitFor();

  await tabTo(page, 'f-timeout');
  await page.keyboard.type('8000');
  await tabTo(page, 'f-confirm');
  await page.keyboard.press('Space');
  await tabTo(page, 'f-version');
  await page.keyboard.type('0.1.0');
  await tabTo(page, 'save');
  await checkA11y(page, 'definition form filled by keyboard');
  await page.keyboard.press('Enter');
  await waitForHeading(page, 'search_docs');

  const r = await rest(env.server, 'GET', '/v1/tools/search_docs');
  assert.equal(r.status, 200);
  assert.equal(r.json.category, 'knowledge');
  assert.equal(r.json.requiresConfirmation, true);
  assert.equal(r.json.version, '0.1.0');
  assert.deepEqual(r.json.definition.parameters, [{ name: 'query', description: 'What to look for', type: 'string', required: true }]);
  assert.equal(r.json.definition.constraints.timeout_ms, 8000);
  assert.deepEqual(env.browser.problems, []);
});
