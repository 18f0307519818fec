// With principals configured the UI asks for a bearer token, keeps it in sessionStorage (never
// in a URL), sends it on every request and on the event stream, and can sign out.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serverAndBrowser, checkA11y, screenshot, waitForHeading, tokenHash } from './lib/harness.js';

const TOKEN = 'tg_ui_test_token_0123456789';
const env = serverAndBrowser({
    config: `[principals.admin]\ntoken_sha256 = "${tokenHash(TOKEN)}"\ngrants = ["*"]\n`,
  });

test('sign in with a token, use the UI, sign out', async () => {
  const { page } = env.browser;
  const urls = [];
  page.on('request', (req) => urls.push(req.url()));
  await page.goto(`${env.server.url}#/tools`);
  await waitForHeading(page, 'Sign in');
  await checkA11y(page, 'sign in');
  await screenshot(page, 'sign-in');
  await page.getByLabel('Bearer token').fill('wrong-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#signin-token-error', { hasText: 'not accepted' }).waitFor();
  await page.getByLabel('Bearer token').fill(TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await waitForHeading(page, 'Tools');
  await page.getByRole('link', { name: 'calculator' }).waitFor();
  await page.locator('#live-state', { hasText: 'on' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('toolgate.token')), TOKEN);
  assert.ok(urls.every((u) => !u.includes(TOKEN)), 'the token never appears in a URL');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await waitForHeading(page, 'Sign in');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('toolgate.token')), null);
  assert.deepEqual(env.browser.problems.filter((p) => !p.includes('401')), []);
});
