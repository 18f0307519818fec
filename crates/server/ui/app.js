// The Tool Manager shell: hash routes, sign-in when the server wants a token, the live event
// stream, and the pending-approvals counter. Each page is a module under views/.

import * as api from './api.js';
import { h, replace, announce } from './dom.js';
import * as tools from './views/tools.js';
import * as toolDetail from './views/tool-detail.js';
import * as toolForm from './views/tool-form.js';
import * as approvals from './views/approvals.js';
import * as calls from './views/calls.js';
import * as playground from './views/playground.js';
import * as servers from './views/servers.js';
import * as runs from './views/runs.js';

const main = document.getElementById('main');
let current = null; // { dispose?, onEvent? } of the page on screen
let stopEvents = null;
let signedOut = false;
let firstRender = true;

/** Route table: hash pattern → [section, module, params from the match]. */
const ROUTES = [
  [/^#\/tools\/?$/, 'tools', tools, () => ({})],
  [/^#\/new-tool$/, 'tools', toolForm, () => ({ mode: 'create' })],
  [/^#\/tools\/([a-z][a-z0-9_]*)\/edit$/, 'tools', toolForm, (m) => ({ mode: 'edit', name: m[1] })],
  [/^#\/tools\/([a-z][a-z0-9_]*)$/, 'tools', toolDetail, (m) => ({ name: m[1] })],
  [/^#\/approvals\/?$/, 'approvals', approvals, () => ({})],
  [/^#\/calls\/?$/, 'calls', calls, () => ({})],
  [/^#\/calls\/([0-9a-fA-F-]{36})$/, 'calls', calls, (m) => ({ id: m[1] })],
  [/^#\/runs\/?$/, 'runs', runs, () => ({})],
  [/^#\/runs\/([0-9a-fA-F-]{36})$/, 'runs', runs, (m) => ({ id: m[1] })],
  [/^#\/playground\/?$/, 'playground', playground, () => ({})],
  [/^#\/playground\/([a-z][a-z0-9_]*)$/, 'playground', playground, (m) => ({ name: m[1] })],
  [/^#\/servers\/?$/, 'servers', servers, () => ({})],
  [/^#\/servers\/([^/]+)$/, 'servers', servers, (m) => ({ name: m[1] })],
];

function resolve(hash) {
  for (const [re, section, module, params] of ROUTES) {
    const m = hash.match(re);
    if (m) return { section, module, params: params(m) };
  }
  return null;
}

export function navigate(hash) {
  if (window.location.hash === hash) render();
  else window.location.hash = hash;
}

async function render() {
  if (signedOut) {
    showSignIn();
    return;
  }
  const hash = window.location.hash || '#/tools';
  const route = resolve(hash);
  if (!route) {
    window.location.replace('#/tools');
    return;
  }
  if (current?.dispose) current.dispose();
  current = null;
  document.querySelectorAll('.nav a').forEach((a) => {
    if (a.dataset.section === route.section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  });
  const page = h('div', { class: 'page' });
  replace(main, page);
  try {
    current = (await route.module.render(page, route.params, { navigate })) || null;
  } catch (e) {
    if (e instanceof api.ApiError && e.status === 401) return;
    replace(page,
      h('h1', { tabindex: '-1' }, 'Something went wrong'),
      h('p', { class: 'notice notice-error', role: 'alert' }, e.message || String(e)),
      h('p', null, h('a', { href: '#/tools' }, 'Back to the tools')));
  }
  const heading = page.querySelector('h1');
  if (heading) {
    document.title = `${heading.textContent} · toolgate`;
    // Move focus to the new page's heading so keyboard and screen-reader users start there.
    if (!firstRender) {
      heading.setAttribute('tabindex', '-1');
      heading.focus();
    }
  }
  firstRender = false;
}

function showSignIn(message) {
  if (current?.dispose) current.dispose();
  current = null;
  document.querySelectorAll('.nav a').forEach((a) => a.removeAttribute('aria-current'));
  const input = h('input', { type: 'password', id: 'signin-token', autocomplete: 'off', required: true, spellcheck: 'false' });
  const error = h('p', { class: 'field-error', id: 'signin-token-error', hidden: !message }, message || '');
  input.setAttribute('aria-describedby', 'signin-token-help signin-token-error');
  const form = h('form', { class: 'card signin', novalidate: true },
    h('div', { class: 'field' },
      h('label', { for: 'signin-token' }, 'Bearer token'),
      input,
      h('p', { class: 'help', id: 'signin-token-help' },
        'This server has principals configured. Paste the token ', h('code', null, 'toolgate token'),
        ' printed for yours; it is kept in this tab only (sessionStorage) and sent as an Authorization header.'),
      error),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'btn btn-primary' }, 'Sign in')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const value = input.value.trim();
    if (!value) {
      error.textContent = 'Enter a token.';
      error.hidden = false;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    api.setToken(value);
    try {
      await api.get('/v1/tools?limit=1');
      signedOut = false;
      updateSession();
      startEvents();
      render();
    } catch (e) {
      api.setToken('');
      error.textContent = e.status === 401 ? 'That token was not accepted.' : e.message;
      error.hidden = false;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
    }
  });
  const live = document.getElementById('live-state');
  live.textContent = 'Live updates: off (signed out)';
  live.dataset.state = 'signed-out';
  replace(main, h('div', { class: 'page page-narrow' },
    h('h1', { tabindex: '-1' }, 'Sign in'),
    form));
  document.title = 'Sign in · toolgate';
  input.focus();
}

function updateSession() {
  const box = document.getElementById('session');
  if (api.token()) {
    replace(box, h('span', { class: 'muted' }, 'Signed in with a token'), ' ',
      h('button', {
        type: 'button',
        class: 'btn btn-small',
        onclick: () => {
          api.setToken('');
          if (stopEvents) stopEvents();
          signedOut = true;
          updateSession();
          showSignIn();
        },
      }, 'Sign out'));
  } else if (!signedOut) {
    replace(box, h('span', { class: 'muted' }, 'Local access'));
  } else {
    replace(box);
  }
}

async function refreshPending() {
  const counter = document.getElementById('pending-count');
  try {
    const list = await api.get('/v1/approvals?status=pending&limit=500');
    const n = list.approvals.length;
    counter.textContent = n ? String(n) : '';
    counter.hidden = n === 0;
    counter.setAttribute('aria-label', `${n} pending`);
  } catch {
    counter.hidden = true;
  }
}

function startEvents() {
  if (stopEvents) stopEvents();
  const state = document.getElementById('live-state');
  stopEvents = api.followEvents((name, data) => {
    if (name === 'approval') refreshPending();
    if (current?.onEvent) current.onEvent(name, data);
  }, (s) => {
    const text = { live: 'Live updates: on', reconnecting: 'Live updates: reconnecting…', 'signed-out': 'Live updates: off' }[s] || s;
    state.textContent = text;
    state.dataset.state = s;
    if (s === 'live') refreshPending();
  });
}

api.onUnauthorized(() => {
  if (signedOut) return;
  signedOut = true;
  if (stopEvents) stopEvents();
  api.setToken('');
  updateSession();
  showSignIn(api.token() ? 'Your token was not accepted; sign in again.' : undefined);
  announce('Sign-in required');
});

async function start() {
  window.addEventListener('hashchange', render);
  // `approval` events keep the counter current whoever decides (the server follows the database
  // for the CLI and other instances); this slow poll only repairs what a dropped stream missed.
  window.setInterval(() => { if (!signedOut && !document.hidden) refreshPending(); }, 60000);
  try {
    await api.get('/v1/tools?limit=1');
  } catch (e) {
    if (e.status === 401) return; // onUnauthorized shows the sign-in form
  }
  updateSession();
  startEvents();
  render();
}

start();
