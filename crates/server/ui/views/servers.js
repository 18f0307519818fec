// Servers: the upstream MCP servers whose tools this server serves — each one's state and the
// tools waiting for approval; a server's page shows its entry, its tools and, for a tool whose
// definition changed since it was approved (quarantined), the old and new definition side by
// side with an Approve button that needs an explicit "I reviewed it" first.

import * as api from '../api.js';
import { h, replace, jsonBlock, facts, announce, toast, badge } from '../dom.js';

const NAME_RE = /^[^/]+$/;

export function stateBadge(state) {
  const kind = { ready: 'ok', starting: 'info', stopped: 'neutral', failed: 'danger' }[state] || 'neutral';
  return badge(state, kind);
}

export function toolStatusBadge(status) {
  const kind = { approved: 'ok', pending: 'warn', quarantined: 'danger', refused: 'neutral' }[status] || 'neutral';
  const text = { quarantined: 'changed · withheld', pending: 'new · withheld' }[status] || status;
  return badge(text, kind);
}

export async function render(page, params) {
  if (params.name) return renderServer(page, params.name);
  return renderList(page);
}

async function renderList(page) {
  const results = h('div', { class: 'results', id: 'servers-results' });
  let timer = null;
  let disposed = false;
  async function load() {
    window.clearTimeout(timer);
    if (disposed) return;
    let list;
    try {
      list = await api.get('/v1/servers');
    } catch (e) {
      replace(results, h('p', { class: 'notice notice-error', role: 'alert' }, e.message));
      return;
    }
    if (list.servers.length === 0) {
      replace(results, h('p', { class: 'empty' },
        'No upstream servers. Declare one under ', h('code', null, '[servers.NAME]'),
        ' in the config file, or add one with ', h('code', null, 'toolgate servers add'), '.'));
      return;
    }
    // States change without an event (a server starting, listing its tools, failing): looked
    // at again shortly, sooner while one is on its way up.
    const starting = list.servers.some((s) => s.state === 'starting' || s.state === 'stopped');
    if (!disposed) timer = window.setTimeout(load, starting ? 1000 : 3000);
    const waiting = list.servers.filter((s) => s.pendingChanges > 0);
    replace(results,
      waiting.length ? h('p', { class: 'notice', id: 'servers-waiting' },
        `${waiting.reduce((n, s) => n + s.pendingChanges, 0)} tool(s) wait for your review: `,
        waiting.map((s, i) => [i ? ', ' : '', h('a', { href: `#/servers/${api.enc(s.name)}` }, s.name)])) : null,
      table(list.servers));
  }
  replace(page,
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Servers'),
        h('p', { class: 'lead' }, 'Upstream MCP servers whose tools are served here, through the same pipeline as every other tool. A tool that is new, or whose definition changed since it was approved, is withheld until you approve it.'))),
    results);
  await load();
  return {
    onEvent(name) {
      if (name === 'server' || name === 'definition') load();
    },
    dispose() { disposed = true; window.clearTimeout(timer); },
  };
}

function table(servers) {
  return h('table', { class: 'table', id: 'servers-table' },
    h('caption', { class: 'visually-hidden' }, 'Upstream servers'),
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Name'),
      h('th', { scope: 'col' }, 'State'),
      h('th', { scope: 'col' }, 'Transport'),
      h('th', { scope: 'col' }, 'Declared in'),
      h('th', { scope: 'col' }, 'Tools served'),
      h('th', { scope: 'col' }, 'Waiting for approval'))),
    h('tbody', null, servers.map((s) => h('tr', { dataset: { server: s.name } },
      h('th', { scope: 'row' }, h('a', { href: `#/servers/${api.enc(s.name)}`, class: 'tool-name' }, s.name)),
      h('td', null, stateBadge(s.state), s.error ? h('span', { class: 'muted clamp', title: s.error }, ' ', s.error) : null),
      h('td', null, s.transport),
      h('td', null, s.source === 'config' ? 'config file' : 'store'),
      h('td', null, String(s.toolsServed)),
      h('td', null, s.pendingChanges ? badge(String(s.pendingChanges), 'warn') : '0')))));
}

async function renderServer(page, rawName) {
  const name = decodeURIComponent(rawName);
  if (!NAME_RE.test(name)) throw new Error(`Not a server name: ${name}`);
  const body = h('div', { id: 'server-body' });
  const heading = h('h1', null, 'Server ', h('code', null, name));

  async function load() {
    let server;
    try {
      server = await api.get(`/v1/servers/${api.enc(name)}`);
    } catch (e) {
      replace(body, h('p', { class: 'notice notice-error', role: 'alert' }, e.message),
        h('p', null, h('a', { href: '#/servers' }, 'Back to the servers')));
      return;
    }
    const tools = server.tools || [];
    const served = tools.filter((t) => t.status === 'approved').length;
    // Changed tools first: a rug pull matters more than a new tool.
    const waiting = tools.filter((t) => t.status === 'pending' || t.status === 'quarantined')
      .sort((a, b) => (a.status === 'quarantined' ? 0 : 1) - (b.status === 'quarantined' ? 0 : 1));
    replace(body,
      facts([
        ['State', h('span', null, stateBadge(server.state), server.error ? ` ${server.error}` : '')],
        ['Transport', server.transport],
        ['Declared in', server.source === 'config' ? 'the config file' : 'the store'],
        ['Starts', server.eager ? 'with toolgate' : 'on first use'],
        ['Tools', `${served} served, ${waiting.length} waiting for approval`],
      ]),
      server.stderrTail ? [h('h2', null, 'Last lines on stderr'), h('pre', { class: 'json', tabindex: '0', 'aria-label': 'stderr' }, server.stderrTail)] : null,
      h('h2', null, 'Entry'),
      jsonBlock(server.entry, `The entry of server ${name} (literal secrets redacted)`),
      h('h2', { id: 'review-heading' }, 'Waiting for your review'),
      waiting.length
        ? h('ul', { class: 'cards', id: 'review-list', 'aria-labelledby': 'review-heading' }, waiting.map((t) => reviewCard(name, t, load)))
        : h('p', { class: 'empty', id: 'review-empty' }, 'Nothing: every tool this server lists is approved or refused.'),
      h('h2', null, 'Tools'),
      toolsTable(tools));
  }

  replace(page,
    h('p', { class: 'crumbs' }, h('a', { href: '#/servers' }, 'Servers'), ' / ', name),
    h('div', { class: 'page-head' }, h('div', null, heading)),
    body);
  await load();
  return {
    onEvent(event) {
      if (event === 'server') load();
    },
  };
}

function toolsTable(tools) {
  if (!tools.length) return h('p', { class: 'empty' }, 'No tools listed yet (the server starts on first use).');
  return h('table', { class: 'table', id: 'server-tools' },
    h('caption', { class: 'visually-hidden' }, 'Tools of this server'),
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Upstream name'),
      h('th', { scope: 'col' }, 'Served as'),
      h('th', { scope: 'col' }, 'Status'),
      h('th', { scope: 'col' }, 'Description'))),
    h('tbody', null, tools.map((t) => h('tr', { dataset: { tool: t.upstreamName } },
      h('th', { scope: 'row' }, h('code', null, t.upstreamName)),
      h('td', null, t.name ? (t.status === 'approved' ? h('a', { href: `#/tools/${t.name}` }, t.name) : h('code', null, t.name)) : '—'),
      h('td', null, toolStatusBadge(t.status), t.reason ? h('span', { class: 'muted' }, ` ${t.reason}`) : null),
      h('td', { class: 'desc' }, h('span', { class: 'clamp', title: t.description || '' }, t.description || ''))))));
}

function show(value) {
  if (value === null || value === undefined) return '(absent)';
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

/** One tool waiting for approval: what changed (approved version beside the new one) or, for a
 * new tool, its description; approving needs the reviewed box ticked first. */
function reviewCard(server, tool, reload) {
  const id = `review-${tool.upstreamName.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const check = h('input', { type: 'checkbox', id: `${id}-ok` });
  const approve = h('button', { type: 'button', class: 'btn btn-primary', disabled: true, 'aria-describedby': `${id}-title` },
    tool.status === 'quarantined' ? 'Approve the new version' : 'Approve');
  check.addEventListener('change', () => { approve.disabled = !check.checked; });
  approve.addEventListener('click', async () => {
    if (!check.checked) return;
    approve.disabled = true;
    try {
      await api.post(`/v1/servers/${api.enc(server)}/approve`, { tools: [tool.upstreamName] });
      toast(`Approved ${tool.name || tool.upstreamName}; it is served from now on`, 'ok');
      announce(`Approved ${tool.upstreamName}`);
      await reload();
    } catch (e) {
      approve.disabled = !check.checked;
      toast(e.message, 'error');
      if (e.status === 409 || e.status === 404) await reload();
    }
  });
  const changes = tool.changes || [];
  return h('li', { class: 'review-card', dataset: { tool: tool.upstreamName } },
    h('article', { class: 'card', 'aria-labelledby': `${id}-title` },
      h('header', { class: 'confirm-head' },
        h('h3', { id: `${id}-title` }, h('code', null, tool.upstreamName),
          tool.status === 'quarantined' ? ' changed since it was approved' : ' is new'),
        h('p', { class: 'badges' }, toolStatusBadge(tool.status))),
      tool.status === 'quarantined'
        ? h('p', null, 'It is withheld from every list and call until you approve the new definition. Compare:')
        : h('p', null, 'It was never approved; it is withheld until you approve it.'),
      changes.length
        ? changes.map((c) => h('div', { class: 'diff', dataset: { field: c.field } },
          h('h4', null, c.field),
          h('div', { class: 'diff-cols' },
            h('figure', { class: 'diff-old' }, h('figcaption', null, 'Approved'), h('pre', { tabindex: '0', 'aria-label': `Approved ${c.field}` }, show(c.old))),
            h('figure', { class: 'diff-new' }, h('figcaption', null, 'New'), h('pre', { tabindex: '0', 'aria-label': `New ${c.field}` }, show(c.new))))))
        : h('p', { class: 'muted' }, tool.description || '(no description)'),
      h('div', { class: 'field field-check' }, check,
        h('label', { for: `${id}-ok` }, tool.status === 'quarantined'
          ? 'I reviewed the new definition and want it served'
          : 'I reviewed this tool and want it served')),
      h('div', { class: 'actions' }, approve)));
}
