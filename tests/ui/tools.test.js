// Tools: create a definition through the form (a live name error and a server-side field error,
// both fixed by the user), see it in the list and in MCP's tools/list, edit it (a new stored
// version), delete it. Built-in tools are read-only.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serverAndBrowser, checkA11y, screenshot, waitForHeading, mcpToolNames, rest } from './lib/harness.js';

const env = serverAndBrowser();

test('create, list, export over MCP, edit and delete a custom definition', async () => {
  const { page } = env.browser;
  await page.goto(`${env.server.url}#/tools`);
  await waitForHeading(page, 'Tools');
  await page.getByRole('row', { name: /calculator/ }).waitFor();
  await checkA11y(page, 'tools list');
  await screenshot(page, 'tools');

  // Filters: custom only shows nothing yet; effect=delete shows delete_file.
  await page.getByLabel('Source').selectOption('false');
  await page.getByText('No tool matches these filters.').waitFor();
  await page.getByLabel('Source').selectOption('');
  await page.getByLabel('Effect').selectOption('delete');
  await page.locator('#tools-count', { hasText: '1 tool' }).waitFor();
  assert.equal(await page.locator('tbody tr').count(), 1);
  await page.getByLabel('Effect').selectOption('');
  await page.getByLabel('Search').fill('arithmetic');
  await page.locator('#tools-count', { hasText: '1 tool' }).waitFor();
  await page.getByLabel('Search').fill('');

  await page.getByRole('link', { name: 'New definition' }).click();
  await waitForHeading(page, 'New tool definition');
  await checkA11y(page, 'new definition form');

  // Live snake_case validation while typing.
  await page.locator('#f-name').fill('Weather Now');
  const nameError = page.locator('#f-name-error');
  await nameError.waitFor();
  assert.match(await nameError.textContent(), /snake_case.*Try weather_now/);
  assert.equal(await page.locator('#f-name').getAttribute('aria-invalid'), 'true');
  await page.locator('#f-name').fill('weather_now');
  await nameError.waitFor({ state: 'hidden' });

  await page.getByLabel('Description').fill('Current weather for a city. Use when the user asks about conditions right now.');
  await page.getByLabel('Category').selectOption('external_api');

  // Parameters: add two, remove one; each change is announced in the live region.
  await page.getByRole('button', { name: '+ Add parameter' }).click();
  assert.equal(await page.locator('#params-live').textContent(), 'Parameter 1 added. 1 parameter in total.');
  await page.locator('#param-list li').nth(0).getByLabel('Name').fill('city');
  await page.locator('#param-list li').nth(0).getByLabel('Description').fill('City name');
  await page.locator('#param-list li').nth(0).getByLabel('Required').check();
  await page.getByRole('button', { name: '+ Add parameter' }).click();
  await page.locator('#param-list li').nth(1).getByLabel('Name').fill('units');
  await page.getByRole('button', { name: 'Remove parameter 2 (units)' }).click();
  assert.equal(await page.locator('#params-live').textContent(), 'Parameter units removed. 1 parameter left.');
  assert.equal(await page.locator('#param-list li').count(), 1);

  // The JSON editor validates as you type.
  const editor = page.getByRole('textbox', { name: 'Output schema, JSON editor' });
  await editor.fill('{"type": "object", "properties": {');
  await page.locator('#f-output-schema-error').waitFor();
  assert.match(await page.locator('#f-output-schema-error').textContent(), /Invalid JSON/);
  await editor.fill('{"type": "object", "properties": {"temperature": {"type": "number"}}}');
  await page.locator('#f-output-schema-status', { hasText: 'Valid JSON.' }).waitFor();
  await page.getByRole('button', { name: 'Format JSON' }).click();
  assert.match(await editor.inputValue(), /\n {2}"type": "object"/);

  // A value only the server refuses: the error appears next to the timeout field.
  await page.getByLabel('Timeout (ms)').fill('500');
  await page.getByLabel('Max output (bytes)').fill('65536');
  await page.getByLabel('Isolation level').selectOption('none');
  await page.getByLabel('Version').fill('1.0.0');
  await page.getByRole('button', { name: 'Create definition' }).click();
  const timeoutError = page.locator('#f-timeout-error');
  await timeoutError.waitFor();
  assert.match(await timeoutError.textContent(), /Timeout 500 ms is outside the allowed range/);
  assert.equal(await page.getByLabel('Timeout (ms)').getAttribute('aria-invalid'), 'true');
  await page.locator('#error-summary', { hasText: 'There is 1 problem' }).waitFor();
  assert.equal(await page.evaluate(() => document.activeElement.id), 'error-summary');
  await checkA11y(page, 'new definition form with a server error');
  await screenshot(page, 'definition-form-error', { scrollTo: '#f-timeout' });

  await page.getByLabel('Timeout (ms)').fill('5000');
  await page.getByRole('button', { name: 'Create definition' }).click();
  await waitForHeading(page, 'weather_now');
  await page.getByText('custom, stored').waitFor();
  await page.getByRole('heading', { name: 'Version history' }).waitFor();
  await page.locator('table', { hasText: 'Stored version' }).getByText('#1').waitFor();
  // The provider exports show this tool only.
  await page.getByRole('button', { name: 'Anthropic' }).click();
  await page.locator('.export-output pre', { hasText: '"input_schema"' }).waitFor();
  assert.match(await page.locator('.export-output pre').textContent(), /weather_now/);
  await page.getByRole('button', { name: 'OpenAI Chat Completions' }).click();
  await page.locator('.export-output pre', { hasText: '"function"' }).waitFor();
  await checkA11y(page, 'custom tool detail');
  await screenshot(page, 'tool-detail');

  // Stored as the form said.
  const stored = await rest(env.server, 'GET', '/v1/tools/weather_now');
  assert.equal(stored.json.category, 'external_api');
  assert.deepEqual(stored.json.definition.parameters, [{ name: 'city', description: 'City name', type: 'string', required: true }]);
  assert.deepEqual(stored.json.definition.constraints, { timeout_ms: 5000, max_output_bytes: 65536, isolation: 'none' });
  assert.deepEqual(stored.json.outputSchema, { type: 'object', properties: { temperature: { type: 'number' } } });

  // In the list (custom filter) and in MCP's tools/list.
  await page.getByRole('link', { name: 'Tools', exact: true }).first().click();
  await waitForHeading(page, 'Tools');
  await page.getByLabel('Source').selectOption('false');
  await page.locator('#tools-count', { hasText: '1 tool' }).waitFor();
  await page.getByRole('link', { name: 'weather_now' }).waitFor();
  assert.ok((await mcpToolNames(env.server)).includes('weather_now'), 'weather_now in MCP tools/list');

  // Edit: a new version with a second parameter.
  await page.getByRole('link', { name: 'weather_now' }).click();
  await waitForHeading(page, 'weather_now');
  await page.getByRole('link', { name: 'Edit definition' }).click();
  await waitForHeading(page, 'Edit weather_now');
  assert.equal(await page.locator('#f-name').getAttribute('readonly'), '');
  assert.equal(await page.getByLabel('Category').inputValue(), 'external_api');
  assert.equal(await page.locator('#param-list li').nth(0).getByLabel('Name').inputValue(), 'city');
  await page.getByRole('button', { name: '+ Add parameter' }).click();
  const second = page.locator('#param-list li').nth(1);
  await second.getByLabel('Name').fill('days');
  await second.getByLabel('Type').selectOption('integer');
  await second.getByLabel('Description').fill('How many days ahead');
  await page.getByLabel('Requires confirmation').check();
  await page.getByLabel('Version').fill('1.1.0');
  await checkA11y(page, 'edit definition form');
  await screenshot(page, 'definition-form');
  await page.getByRole('button', { name: 'Save new version' }).click();
  await waitForHeading(page, 'weather_now');
  await page.getByText('requires confirmation').first().waitFor();
  await page.locator('table', { hasText: 'Stored version' }).getByText('#2').waitFor();
  const edited = await rest(env.server, 'GET', '/v1/tools/weather_now');
  assert.equal(edited.json.storedVersion, 2);
  assert.equal(edited.json.version, '1.1.0');
  assert.equal(edited.json.definition.parameters.length, 2);
  assert.equal(edited.json.requiresConfirmation, true);

  // Delete, through the confirmation dialog.
  await page.getByRole('button', { name: 'Delete' }).click();
  const dialog = page.getByRole('dialog', { name: 'Delete weather_now?' });
  await dialog.waitFor();
  await checkA11y(page, 'delete dialog');
  await dialog.getByRole('button', { name: 'Delete weather_now' }).click();
  await waitForHeading(page, 'Tools');
  assert.equal((await rest(env.server, 'GET', '/v1/tools/weather_now')).status, 404);
  await page.getByLabel('Source').selectOption('false');
  await page.getByText('No tool matches these filters.').waitFor();
  assert.ok(!(await mcpToolNames(env.server)).includes('weather_now'), 'weather_now gone from MCP tools/list');
  assert.deepEqual(env.browser.problems, []);
});

test('built-in tools are read-only', async () => {
  const { page } = env.browser;
  await page.goto(`${env.server.url}#/tools/write_file`);
  await waitForHeading(page, 'write_file');
  await page.getByText('Built-in tools are read-only.').waitFor();
  await page.locator('.export-output pre').waitFor();
  await checkA11y(page, 'built-in tool detail');
  assert.equal(await page.getByRole('link', { name: 'Edit definition' }).count(), 0);
  assert.equal(await page.getByRole('button', { name: 'Delete' }).count(), 0);
  await page.goto(`${env.server.url}#/tools/write_file/edit`);
  await waitForHeading(page, 'write_file is built in');
  assert.equal(await page.locator('form').count(), 0);
  await checkA11y(page, 'built-in edit refused');
  // A tool that writes says whether side effects are allowed; a read-only one does not.
  await page.goto(`${env.server.url}#/tools/write_file`);
  await waitForHeading(page, 'write_file');
  await page.getByText('Side effects allowed').waitFor();
  await page.goto(`${env.server.url}#/tools/read_file`);
  await waitForHeading(page, 'read_file');
  await page.locator('.export-output pre').waitFor();
  assert.equal(await page.getByText('Side effects allowed').count(), 0);
  assert.deepEqual(env.browser.problems, []);
});
