// Calls: the audit log (newest first) with filters, and one call's detail: input, result or
// error, attempts, duration, and a large output kept apart from the log.

import * as api from '../api.js';
import { h, replace, options, jsonBlock, facts, announce } from '../dom.js';
import { when, duration, outcomeBadge, label, origin, canceller } from '../format.js';

const state = { tool: '', principal: '', outcome: '' };
const OUTCOMES = [['', 'Any outcome'], ['ok', 'Succeeded'], ['error', 'Failed (any error)'],
  ...['validation', 'authorization', 'confirmation_required', 'rejected', 'timeout', 'cancelled', 'execution', 'output_invalid', 'rate_limited', 'unavailable', 'not_found']
    .map((k) => [k, `Failed: ${label(k)}`])];

export async function render(page, params) {
  if (params.id) return detail(page, params.id);
  return list(page);
}

async function list(page) {
  const body = h('tbody');
  const tableBox = h('div');
  const status = h('p', { class: 'muted', role: 'status', id: 'calls-count' });
  const more = h('button', { type: 'button', class: 'btn', hidden: true }, 'Load older calls');
  const newer = h('button', { type: 'button', class: 'btn btn-small', hidden: true }, 'Show new calls');
  let cursor = null;
  let shown = 0;

  let toolNames = [];
  try {
    toolNames = (await api.get('/v1/tools?limit=500')).tools.map((t) => t.name);
  } catch {
    toolNames = [];
  }
  const tool = h('select', { id: 'calls-tool' }, options([['', 'Any tool'], ...toolNames.map((n) => [n, n])], state.tool));
  const principal = h('input', { type: 'text', id: 'calls-principal', value: state.principal, placeholder: 'for example local', autocomplete: 'off' });
  const outcome = h('select', { id: 'calls-outcome' }, options(OUTCOMES, state.outcome));

  async function load(append) {
    const q = { tool: state.tool, principal: state.principal, outcome: state.outcome, limit: 50, cursor: append ? cursor : '' };
    let page2;
    try {
      page2 = await api.get(`/v1/calls${api.query(q)}`);
    } catch (e) {
      replace(tableBox, h('p', { class: 'notice notice-error', role: 'alert' }, e.message));
      return;
    }
    if (!append) {
      replace(body);
      shown = 0;
      replace(tableBox, table(body));
    }
    for (const c of page2.calls) body.appendChild(row(c));
    shown += page2.calls.length;
    cursor = page2.nextCursor;
    more.hidden = !cursor;
    newer.hidden = true;
    status.textContent = shown ? `${shown} call${shown === 1 ? '' : 's'} shown` : '';
    if (!shown) replace(tableBox, h('p', { class: 'empty' }, 'No call matches these filters.'));
  }
  more.addEventListener('click', () => load(true));
  newer.addEventListener('click', () => load(false));

  let timer = null;
  const onFilter = () => {
    state.tool = tool.value;
    state.principal = principal.value.trim();
    state.outcome = outcome.value;
    window.clearTimeout(timer);
    timer = window.setTimeout(() => load(false), 200);
  };
  tool.addEventListener('change', onFilter);
  outcome.addEventListener('change', onFilter);
  principal.addEventListener('input', onFilter);

  replace(page,
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Calls'),
        h('p', { class: 'lead' }, 'The audit log: every call through this server, newest first. Entries are chained and never changed.')),
      newer),
    h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter calls', onsubmit: (e) => { e.preventDefault(); onFilter(); } },
      h('div', { class: 'field' }, h('label', { for: 'calls-tool' }, 'Tool'), tool),
      h('div', { class: 'field' }, h('label', { for: 'calls-principal' }, 'Principal'), principal),
      h('div', { class: 'field' }, h('label', { for: 'calls-outcome' }, 'Outcome'), outcome)),
    status,
    tableBox,
    h('div', { class: 'actions' }, more));
  await load(false);
  return {
    onEvent(name) {
      if (name === 'call' && newer.hidden) {
        newer.hidden = false;
        announce('New calls are available');
      }
    },
    dispose() { window.clearTimeout(timer); },
  };
}

function table(body) {
  return h('table', { class: 'table', id: 'calls-table' },
    h('caption', { class: 'visually-hidden' }, 'Audited calls'),
    h('thead', null, h('tr', null, ['Time', 'Tool', 'Principal', 'Outcome', 'Attempts', 'Duration'].map((c) => h('th', { scope: 'col' }, c)))),
    body);
}

function row(c) {
  return h('tr', { dataset: { call: c.callId } },
    h('td', null, h('a', { href: `#/calls/${c.callId}` }, when(c.fetchedAt))),
    h('th', { scope: 'row' }, h('code', null, c.tool)),
    h('td', null, c.principal),
    h('td', null, outcomeBadge(c), c.truncated ? ' truncated' : '', c.outputRef ? ' · stored output' : ''),
    h('td', { class: 'num' }, String(c.attempts)),
    h('td', { class: 'num' }, duration(c.durationMs)));
}

async function detail(page, id) {
  const call = await api.get(`/v1/calls/${api.enc(id)}`);
  const f = call.finished;
  const s = call.started;
  const tool = f?.tool || s?.tool;
  const outputBox = h('div', { id: 'stored-output' });

  async function loadOutput() {
    replace(outputBox, h('p', { class: 'muted' }, 'Loading…'));
    try {
      const r = await api.request('GET', `/v1/calls/${api.enc(id)}/output`);
      const text = r.text;
      const shownText = text.length > 200000 ? `${text.slice(0, 200000)}\n… (${text.length - 200000} more characters)` : text;
      let pretty = shownText;
      try {
        if (text.length <= 200000) pretty = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        pretty = shownText;
      }
      const blob = new Blob([text], { type: 'application/json' });
      const link = h('a', { href: URL.createObjectURL(blob), download: `${tool}-${id}.json`, class: 'btn btn-small' }, 'Download');
      replace(outputBox,
        h('p', null, `${text.length.toLocaleString()} characters `, link),
        h('pre', { class: 'json', tabindex: '0', 'aria-label': 'Stored output' }, pretty));
    } catch (e) {
      replace(outputBox, h('p', { class: 'notice notice-error' }, e.message));
    }
  }

  replace(page,
    h('p', { class: 'crumbs' }, h('a', { href: '#/calls' }, 'Calls'), ' / ', h('code', null, id)),
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Call to ', h('code', null, tool || '?')),
        h('p', { class: 'badges' }, f ? outcomeBadge(f) : null, call.interrupted ? h('span', { class: 'badge badge-danger' }, 'interrupted') : null)),
      tool ? h('a', { class: 'btn', href: `#/playground/${tool}` }, 'Call again in playground') : null),
    call.interrupted ? h('p', { class: 'notice notice-error' }, 'This call started but never recorded an outcome: the process stopped during it, so it may have had its effect. Check by hand.') : null,
    h('div', { class: 'grid-2' },
    h('section', { class: 'card' }, h('h2', null, 'Summary'), facts([
      ['Call id', h('code', null, id)],
      ['Tool', tool ? h('a', { href: `#/tools/${tool}` }, tool) : null],
      ['Principal', f?.principal || s?.principal],
      ['Came from', origin(f?.origin)],
      ['Cancelled by', f?.cancelledBy ? canceller(f.cancelledBy) : null],
      ['Started', s ? when(s.fetchedAt) : null],
      ['Finished', f ? when(f.fetchedAt) : null],
      ['Attempts', f ? String(f.attempts) : null],
      ['Duration', f ? duration(f.durationMs) : null],
      ['Truncated', f?.truncated ? 'yes: the output was cut at the tool\'s limit' : null],
      ['Definition hash', f?.definitionHash ? h('code', { class: 'hash' }, f.definitionHash) : null],
      ['Audit position', f?.seq !== undefined ? `#${f.seq}` : null],
    ])),
    h('section', { class: 'card' }, h('h2', null, 'Input'), jsonBlock(f?.input ?? s?.input ?? {}, 'Input'))),
    f ? h('section', { class: 'card' },
      h('h2', null, f.errorKind ? 'Error' : 'Result'),
      f.errorKind
        ? h('div', null, h('p', null, h('strong', null, label(f.errorKind)), ': ', f.error))
        : (f.outputRef
          ? h('div', null,
            h('p', null, 'The output was larger than the log keeps inline, so it is stored apart.'),
            h('button', { type: 'button', class: 'btn', id: 'load-output', onclick: loadOutput }, 'Show stored output'),
            outputBox)
          : jsonBlock(f.data, 'Result data'))) : null);
  return null;
}
