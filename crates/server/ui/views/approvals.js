// The approvals inbox: each pending call as a confirmation card (tool, consequence, who asked
// and why, the arguments, when it expires) with approve/deny and a reason; decided ones below
// with their results. Updates live from `approval` events, whoever decided.

import * as api from '../api.js';
import { h, replace, jsonBlock, facts, announce, toast, badge } from '../dom.js';
import { when, until, label, consequenceBadge, effectBadge, statusBadge, duration, origin } from '../format.js';

export async function render(page) {
  const pendingList = h('ul', { class: 'cards', id: 'pending-list', 'aria-label': 'Pending approvals' });
  const pendingEmpty = h('p', { class: 'empty', id: 'pending-empty', hidden: true }, 'Nothing is waiting for a decision.');
  const pendingHeading = h('h2', { id: 'pending-heading' }, 'Waiting for a decision');
  const decidedBox = h('div', { id: 'decided' });
  const cards = new Map(); // approval id → {el, approval}
  const decidedHere = new Set();
  let tools = new Map();

  async function loadTools() {
    try {
      const list = await api.get('/v1/tools?limit=500');
      tools = new Map(list.tools.map((t) => [t.name, t]));
    } catch {
      // The cards still show without consequence.
    }
  }

  async function decide(approval, approve, reasonInput, buttons) {
    buttons.forEach((b) => { b.disabled = true; });
    const reason = reasonInput.value.trim();
    decidedHere.add(approval.id);
    try {
      const r = await api.post(`/v1/approvals/${api.enc(approval.id)}/${approve ? 'approve' : 'deny'}`, reason ? { reason } : {});
      toast(approve ? `Approved ${approval.tool}; it runs now` : `Denied ${approval.tool}; it will not run`, approve ? 'ok' : 'info');
      announce(approve ? `Approved ${approval.tool}` : `Denied ${approval.tool}`);
      removeCard(approval.id, r.json);
      await load();
    } catch (e) {
      decidedHere.delete(approval.id);
      buttons.forEach((b) => { b.disabled = false; });
      toast(e.message, 'error');
      if (e.status === 409 || e.status === 404) await load();
    }
  }

  function card(a) {
    const tool = tools.get(a.tool);
    const reasonId = `reason-${a.id}`;
    const reasonInput = h('textarea', { id: reasonId, rows: '2', placeholder: 'Why you approve or deny (kept with the decision)' });
    const approveBtn = h('button', { type: 'button', class: 'btn btn-primary', 'aria-describedby': `title-${a.id}` }, 'Approve');
    const denyBtn = h('button', { type: 'button', class: 'btn btn-danger', 'aria-describedby': `title-${a.id}` }, 'Deny');
    approveBtn.addEventListener('click', () => decide(a, true, reasonInput, [approveBtn, denyBtn]));
    denyBtn.addEventListener('click', () => decide(a, false, reasonInput, [approveBtn, denyBtn]));
    return h('li', { class: 'approval-card', dataset: { id: a.id, tool: a.tool } },
      h('article', { class: 'card confirm-card', 'aria-labelledby': `title-${a.id}` },
        h('header', { class: 'confirm-head' },
          h('h3', { id: `title-${a.id}` }, 'Run ', h('code', null, a.tool), '?'),
          h('p', { class: 'badges' },
            tool ? consequenceBadge(tool.consequence) : badge('consequence unknown', 'neutral'), ' ',
            tool ? effectBadge(tool.effect) : null)),
        tool?.description ? h('p', { class: 'muted confirm-desc clamp', title: tool.description }, tool.description) : null,
        facts([
          ['Asked by', a.principal],
          ['Came from', origin(a.origin)],
          ['Their reason', a.reason || null],
          ['Asked', when(a.createdAt)],
          ['Expires', h('span', null, h('time', { datetime: a.expiresAt }, `${until(a.expiresAt)}`), h('span', { class: 'muted' }, ` (${when(a.expiresAt)})`))],
          ['Approval', h('code', null, a.id)],
        ]),
        h('h4', null, 'Arguments'),
        jsonBlock(a.arguments, `Arguments of the ${a.tool} call`),
        h('div', { class: 'field' }, h('label', { for: reasonId }, 'Reason for your decision (optional)'), reasonInput),
        h('div', { class: 'actions' }, approveBtn, denyBtn)));
  }

  function removeCard(id) {
    const entry = cards.get(id);
    if (!entry) return;
    cards.delete(id);
    const wasFocused = entry.el.contains(document.activeElement);
    const next = entry.el.nextElementSibling || entry.el.previousElementSibling;
    entry.el.remove();
    if (wasFocused) {
      const target = next?.querySelector('button') || pendingHeading;
      if (target === pendingHeading) pendingHeading.setAttribute('tabindex', '-1');
      target.focus();
    }
  }

  let seq = 0;
  async function load() {
    const mine = ++seq;
    let pending;
    let recent;
    try {
      [pending, recent] = await Promise.all([
        api.get('/v1/approvals?status=pending&limit=500'),
        api.get('/v1/approvals?limit=50'),
      ]);
    } catch (e) {
      replace(decidedBox, h('p', { class: 'notice notice-error', role: 'alert' }, e.message));
      return;
    }
    if (mine !== seq) return;
    const ids = new Set(pending.approvals.map((a) => a.id));
    for (const id of [...cards.keys()]) {
      if (!ids.has(id)) {
        const tool = cards.get(id).approval.tool;
        removeCard(id);
        if (!decidedHere.has(id)) announce(`The ${tool} approval was decided elsewhere`);
      }
    }
    // Oldest first: the one that expires soonest on top.
    const ordered = [...pending.approvals].reverse();
    let added = 0;
    for (const a of ordered) {
      if (cards.has(a.id)) continue;
      const el = card(a);
      cards.set(a.id, { el, approval: a });
      pendingList.appendChild(el);
      added += 1;
    }
    if (added && mine > 1) announce(`${added} new approval${added === 1 ? '' : 's'} waiting`);
    pendingEmpty.hidden = cards.size > 0;
    pendingHeading.textContent = cards.size ? `Waiting for a decision (${cards.size})` : 'Waiting for a decision';
    const decided = recent.approvals.filter((a) => a.status !== 'pending');
    replace(decidedBox, decided.length ? decidedTable(decided) : h('p', { class: 'empty' }, 'No decisions yet.'));
  }

  await loadTools();
  replace(page,
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Approvals'),
        h('p', { class: 'lead' }, 'Calls to tools that need a yes wait here. Approving runs the call once, with the arguments shown; denying means it never runs.'))),
    h('section', { 'aria-labelledby': 'pending-heading' }, pendingHeading, pendingEmpty, pendingList),
    h('section', { 'aria-labelledby': 'decided-heading', class: 'section-gap' },
      h('h2', { id: 'decided-heading' }, 'Recent decisions'),
      decidedBox));
  await load();

  let timer = null;
  // Every change arrives as an `approval` event, whoever made it: this server's own at once, those
  // of the CLI or another instance (straight in the database) within about a second, as the
  // server follows the database. This slow poll only repairs what a dropped event stream missed.
  const poll = window.setInterval(() => { if (!document.hidden) load(); }, 30000);
  return {
    onEvent(name) {
      if (name === 'approval') {
        window.clearTimeout(timer);
        timer = window.setTimeout(load, 100);
      } else if (name === 'definition') {
        loadTools();
      }
    },
    dispose() {
      window.clearTimeout(timer);
      window.clearInterval(poll);
    },
  };
}

function decidedTable(list) {
  return h('table', { class: 'table', id: 'decided-table' },
    h('caption', { class: 'visually-hidden' }, 'Recent decisions'),
    h('thead', null, h('tr', null, ['Tool', 'Status', 'Asked by', 'Decided by', 'Reason', 'Result'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, list.map((a) => h('tr', { dataset: { id: a.id, status: a.status } },
      h('th', { scope: 'row' }, h('code', null, a.tool)),
      h('td', null, statusBadge(a.status)),
      h('td', null, a.principal),
      h('td', null, a.decidedBy || '', a.decidedAt ? h('div', { class: 'muted small' }, when(a.decidedAt)) : null),
      h('td', null, a.decisionReason || ''),
      h('td', null, result(a))))));
}

function result(a) {
  if (!a.result) return a.status === 'approved' || a.status === 'running' ? h('span', { class: 'muted' }, 'running…') : '';
  const r = a.result;
  const head = r.errorKind
    ? h('span', null, badge(label(r.errorKind), 'danger'), ' ', r.error || '')
    : h('span', null, badge('ok', 'ok'), r.durationMs !== undefined ? ` in ${duration(r.durationMs)}` : '');
  return h('div', { class: 'result-cell' },
    head,
    h('details', null, h('summary', null, 'Envelope'), jsonBlock(r, `Result of ${a.tool}`)),
    r.callId ? h('a', { href: `#/calls/${r.callId}`, class: 'small' }, 'Audit entry') : null);
}
