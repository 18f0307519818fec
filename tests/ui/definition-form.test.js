// The whole definition model in the browser: an `http` tool made with the form (governance,
// permissions, tags, retries, the run section) against a server this test starts, called from
// the playground; and the TOML / JSON / YAML text mode, whose problems appear at their lines as
// you type. The config lets http tools reach 127.0.0.1 explicitly ([network] private_hosts); the
// default policy refuses loopback.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { serverAndBrowser, checkA11y, screenshot, waitForHeading, rest } from './lib/harness.js';

const env = serverAndBrowser({ config: '[network]\nprivate_hosts = ["127.0.0.1"]\n' });

// The weather API the http tool calls: GET /weather/{city} -> {"data": {...}}.
const api = { hits: [] };
before(async () => {
  api.server = createServer((req, res) => {
    api.hits.push(`${req.method} ${req.url}`);
    const m = /^\/weather\/([^/?]+)/.exec(req.url);
    if (req.method !== 'GET' || !m) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ data: { city: decodeURIComponent(m[1]), temperature: 21.5 }, source: 'test' }));
  });
  await new Promise((r) => api.server.listen(0, '127.0.0.1', r));
  api.url = `http://127.0.0.1:${api.server.address().port}`;
});
after(() => new Promise((r) => api.server.close(r)));

test('an http tool made with the form is called from the playground', async () => {
  const { page } = env.browser;
  await page.goto(`${env.server.url}#/new-tool`);
  await waitForHeading(page, 'New tool definition');
  await page.locator('#f-name').fill('city_weather');
  await page.getByLabel('Description').fill('Current weather for a city, from the test weather API. Use when asked about the weather now.');
  await page.getByLabel('Category').selectOption('external_api');
  await page.getByRole('button', { name: '+ Add parameter' }).click();
  await page.locator('#param-list li').nth(0).getByLabel('Name').fill('city');
  await page.locator('#param-list li').nth(0).getByLabel('Required').check();

  // Governance: a read tool does not offer "Side effects allowed"; a write tool does.
  assert.equal(await page.getByLabel('Effect', { exact: true }).inputValue(), 'read');
  assert.equal(await page.getByLabel('Side effects allowed').isVisible(), false);
  await page.getByLabel('Effect', { exact: true }).selectOption('write');
  await page.getByLabel('Side effects allowed').waitFor();
  await page.getByLabel('Effect', { exact: true }).selectOption('read');
  await page.getByLabel('Side effects allowed').waitFor({ state: 'hidden' });
  await page.getByLabel('Consequence').selectOption('medium');
  await page.getByLabel('Required permissions').fill('tool.weather.read');
  await page.getByLabel('Tags').fill('weather, demo');
  await page.getByLabel('Max attempts').fill('2');

  // The run section: the http settings appear for kind http only.
  assert.equal(await page.getByLabel('URL').count(), 1);
  assert.equal(await page.getByLabel('URL').isVisible(), false);
  await page.getByLabel('Run kind').selectOption('http');
  await page.getByLabel('URL').fill(`${api.url}/weather/{city}`);
  await page.getByLabel('Response (JSON pointer)').fill('/data');
  await page.getByLabel('Expected status codes').fill('200');
  // A header map that is not JSON is caught next to its field.
  await page.getByLabel('Headers (JSON object)').fill('{"Accept": ');
  await page.getByRole('button', { name: 'Create definition' }).click();
  await page.locator('#f-http-headers-error').waitFor();
  assert.equal(await page.getByLabel('Headers (JSON object)').getAttribute('aria-invalid'), 'true');
  await checkA11y(page, 'definition form: http run section with an error');
  await page.getByLabel('Headers (JSON object)').fill('{"Accept": "application/json"}');
  await screenshot(page, 'definition-form-http', { scrollTo: '#f-run-kind' });
  await page.getByRole('button', { name: 'Create definition' }).click();
  await waitForHeading(page, 'city_weather');
  // Read-only: the detail does not say "Side effects allowed".
  await page.locator('.export-output pre').waitFor();
  assert.equal(await page.getByText('Side effects allowed').count(), 0);

  const stored = await rest(env.server, 'GET', '/v1/tools/city_weather');
  const def = stored.json.definition;
  assert.equal(def.consequence, 'medium');
  assert.equal(def.effect, undefined, 'the default effect is left out');
  assert.deepEqual(def.required_permissions, ['tool.weather.read']);
  assert.deepEqual(def.tags, ['weather', 'demo']);
  assert.deepEqual(def.constraints, { max_attempts: 2 });
  assert.deepEqual(def.run, {
    kind: 'http', url: `${api.url}/weather/{city}`, response: '/data', expect_status: [200],
    headers: { Accept: 'application/json' },
  });

  // Called from the playground: the request reaches the test's server.
  await page.goto(`${env.server.url}#/playground`);
  await waitForHeading(page, 'Playground');
  await page.getByLabel('Tool', { exact: true }).selectOption('city_weather');
  await page.locator('#arg-city').waitFor();
  await page.getByLabel(/^city/).fill('Paris');
  await page.getByRole('button', { name: 'Call city_weather' }).click();
  await page.locator('#pg-outcome').getByText('Succeeded').waitFor();
  const result = await page.locator('#pg-result pre').textContent();
  assert.match(result, /"temperature": 21.5/);
  assert.match(result, /"city": "Paris"/);
  assert.deepEqual(api.hits, ['GET /weather/Paris']);
  await checkA11y(page, 'playground: the http tool made in the browser');

  // Editing shows what was stored.
  await page.goto(`${env.server.url}#/tools/city_weather/edit`);
  await waitForHeading(page, 'Edit city_weather');
  assert.equal(await page.getByLabel('Run kind').inputValue(), 'http');
  assert.equal(await page.getByLabel('URL').inputValue(), `${api.url}/weather/{city}`);
  assert.equal(await page.getByLabel('Tags').inputValue(), 'weather, demo');
  assert.deepEqual(env.browser.problems, []);
});

test('a pasted TOML definition shows each problem at its line as you type', async () => {
  const { page } = env.browser;
  await page.goto(`${env.server.url}#/new-tool`);
  await waitForHeading(page, 'New tool definition');
  await page.getByLabel('TOML, JSON or YAML text').check();
  const text = page.getByLabel('Definition (TOML, JSON or YAML)');
  await text.waitFor();
  assert.equal(await page.getByLabel('Description').isVisible(), false, 'the form is hidden in text mode');
  assert.equal(await page.getByLabel('Format').inputValue(), 'toml');

  // Two mistakes: a name that is not snake_case (line 1) and a timeout below the minimum (line 6).
  await text.fill([
    'name = "Get-Weather"',
    'description = "Current weather for a city. Use when asked about the weather now."',
    'category = "external_api"',
    '',
    '[constraints]',
    'timeout_ms = 500',
    '',
  ].join('\n'));
  await page.locator('#t-text-status', { hasText: '2 problems found.' }).waitFor();
  assert.equal(await text.getAttribute('aria-invalid'), 'true');
  const items = await page.locator('#t-problems li.text-error').allTextContents();
  assert.equal(items.length, 2, items.join('\n'));
  assert.match(items[0], /^Line 1, column 1 \(name\): .*snake_case/);
  assert.match(items[1], /^Line 6, column 1 \(constraints\.timeout_ms\): Timeout 500 ms/);
  assert.deepEqual(await page.locator('.gutter-bad').allTextContents(), ['! 1', '! 6']);
  // An item moves the caret to its line.
  await page.getByRole('button', { name: 'Line 6, column 1 (constraints.timeout_ms):' }).click();
  assert.equal(await page.evaluate(() => document.activeElement.id), 't-text');
  assert.equal(await page.evaluate(() => {
    const t = document.getElementById('t-text');
    return t.value.slice(t.selectionStart, t.selectionEnd);
  }), 'timeout_ms = 500');
  await checkA11y(page, 'definition text with two problems');
  await screenshot(page, 'definition-text', { scrollTo: '#t-text' });

  // Saving is refused with the same problems in the summary.
  await page.getByRole('button', { name: 'Create definition' }).click();
  await page.locator('#error-summary', { hasText: 'There are 2 problems' }).waitFor();

  // Well-formed text that is not a definition: every mistake at once, each at its line.
  await text.fill('name = "get_weather"\ndescription = "Current weather."\nefect = "read"\ncategory = "nowhere"\n');
  await page.locator('#t-problems li', { hasText: /^Line 3, column 1 \(efect\): unknown field `efect`; did you mean `effect`\?/ }).waitFor();
  await page.locator('#t-problems li', { hasText: /^Line 4, column \d+ \(category\): / }).waitFor();
  assert.deepEqual(await page.locator('.gutter-bad').allTextContents(), ['! 3', '! 4']);
  await checkA11y(page, 'definition text with mistakes serde stops at');

  // Text that does not parse: the parser's line.
  await text.fill('name = "get_weather"\ndescription = \n');
  await page.locator('#t-problems li', { hasText: /^Line 2, column \d+: / }).waitFor();
  assert.deepEqual(await page.locator('.gutter-bad').allTextContents(), ['! 2']);
  await checkA11y(page, 'definition text that does not parse');

  // YAML, fixed: valid, and saved as the server read it.
  await page.getByLabel('Format').selectOption('yaml');
  await text.fill('name: get_weather\ndescription: Current weather for a city. Use when asked about the weather now.\ncategory: external_api\neffect: read\ntags: [weather]\nconstraints:\n  timeout_ms: 5000\n');
  await page.locator('#t-text-status', { hasText: 'Valid definition' }).waitFor();
  assert.equal(await page.locator('.gutter-bad').count(), 0);
  await checkA11y(page, 'valid definition text');
  await page.getByRole('button', { name: 'Create definition' }).click();
  await waitForHeading(page, 'get_weather');
  const stored = await rest(env.server, 'GET', '/v1/tools/get_weather');
  assert.deepEqual(stored.json.definition.tags, ['weather']);
  assert.deepEqual(stored.json.definition.constraints, { timeout_ms: 5000 });
  assert.deepEqual(env.browser.problems, []);
});
