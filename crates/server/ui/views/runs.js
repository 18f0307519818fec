// Runs: the signed-in principal's agent runs (newest first) with what each has spent against its
// budget (turns, tool calls, failures per tool, wall time against the timeout), and one run's
// detail with the calls counted against it (each linking to its audit entry).

import * as api from '../api.js';
import { h, replace, facts, badge, announce } from '../dom.js';
import { when, duration, bytes } from '../format.js';

// What the server assumes when a budget leaves max_attempts_per_tool out (seed 001: three).
const DEFAULT_ATTEMPTS = 3;

export async function render(page, params) {
  if (params.id) return detail(page, params.id);
  return list(page);
}

export function runStatusBadge(status) {
  const kind = { open: 'info', exhausted: 'danger', finished: 'neutral' }[status] || 'neutral';
  return badge(status, kind);
}

/** "3 of 10", or "3 (no limit)" when the budget leaves the key out. */
function used(n, limit, fmt = String) {
  if (limit === undefined || limit === null) return `${fmt(n)} (no limit)`;
  return `${fmt(n)} of ${fmt(limit)}`;
}

/** A native meter for a count against its limit (nothing when there is no limit). */
function meter(n, limit, name) {
  if (limit === undefined || limit === null) return null;
  return h('meter', {
    min: '0', max: String(limit), value: String(Math.min(n, limit)),
    low: String(limit * 0.7), high: String(limit * 0.9), optimum: '0',
    'aria-label': name,
  });
}

/** Wall time against the timeout; a closed run's clock no longer matters. */
function elapsed(run) {
  if (run.status !== 'open') return run.budget.timeout_ms ? `closed (timeout ${duration(run.budget.timeout_ms)})` : 'closed';
  return used(run.elapsedMs, run.budget.timeout_ms, duration);
}

function attemptsLimit(run) {
  return run.budget.max_attempts_per_tool ?? DEFAULT_ATTEMPTS;
}

/** "search_files 2 of 3, fetch_url 1 of 3", or "none". */
function failuresText(run) {
  const entries = Object.entries(run.failures || {});
  if (!entries.length) return 'none';
  const limit = attemptsLimit(run);
  return entries.map(([tool, n]) => `${tool} ${n} of ${limit}`).join(', ');
}

async function list(page) {
  const body = h('tbody');
  const tableBox = h('div');
  const status = h('p', { class: 'muted', role: 'status', id: 'runs-count' });
  let timer = null;
  let seq = 0;

  async function load() {
    const mine = ++seq;
    let answer;
    try {
      answer = await api.get('/v1/runs?limit=100');
    } catch (e) {
      replace(tableBox, h('p', { class: 'notice notice-error', role: 'alert' }, e.message));
      return;
    }
    if (mine !== seq) return;
    const runs = answer.runs;
    status.textContent = runs.length ? `${runs.length} run${runs.length === 1 ? '' : 's'}` : '';
    if (!runs.length) {
      replace(tableBox, h('p', { class: 'empty' },
        'No runs yet. A run is one agent task with a budget: ', h('code', null, 'toolgate agent run'),
        ' starts one, and so does ', h('code', null, 'POST /v1/runs'), '.'));
      return;
    }
    // Keep keyboard focus on the same run's link when the rows are redrawn.
    const focused = document.activeElement?.closest?.('tr[data-run]')?.dataset.run;
    replace(body, runs.map(row));
    if (!tableBox.contains(body)) replace(tableBox, table(body));
    if (focused) body.querySelector(`tr[data-run="${focused}"] a`)?.focus();
  }

  replace(page,
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Runs'),
        h('p', { class: 'lead' }, 'Your agent runs, newest first: one task each, with a budget the gateway enforces on every call. Shown: what each has spent against it.'))),
    status,
    tableBox);
  await load();
  return {
    onEvent(name) {
      // A call may have been counted against a run: redraw soon (once for a burst).
      if (name !== 'call') return;
      window.clearTimeout(timer);
      timer = window.setTimeout(load, 300);
    },
    dispose() { window.clearTimeout(timer); },
  };
}

function table(body) {
  return h('table', { class: 'table', id: 'runs-table' },
    h('caption', { class: 'visually-hidden' }, 'Your runs and their consumption'),
    h('thead', null, h('tr', null, ['Run', 'Status', 'Started', 'Turns', 'Tool calls', 'Failures per tool', 'Elapsed']
      .map((c) => h('th', { scope: 'col' }, c)))),
    body);
}

function row(run) {
  const b = run.budget;
  return h('tr', { dataset: { run: run.id, status: run.status } },
    h('th', { scope: 'row' }, h('a', { href: `#/runs/${run.id}`, 'aria-label': `Run ${run.id}` }, h('code', null, run.id))),
    h('td', null, runStatusBadge(run.status)),
    h('td', null, when(run.startedAt)),
    h('td', { class: 'num' }, used(run.turns, b.max_turns)),
    h('td', { class: 'num' }, used(run.toolCalls, b.max_tool_calls)),
    h('td', null, failuresText(run)),
    h('td', null, elapsed(run)));
}

async function detail(page, id) {
  const box = h('div');
  replace(page,
    h('p', { class: 'crumbs' }, h('a', { href: '#/runs' }, 'Runs'), ' / ', h('code', null, id)),
    box);
  let timer = null;

  async function load() {
    const run = await api.get(`/v1/runs/${api.enc(id)}`);
    replace(box, ...content(run));
  }
  await load();
  return {
    onEvent(name) {
      if (name !== 'call') return;
      window.clearTimeout(timer);
      timer = window.setTimeout(() => {
        // Redraw only when focus is not inside (a redraw would drop it).
        if (box.contains(document.activeElement)) return;
        load().then(() => announce('The run was updated'), () => {});
      }, 300);
    },
    dispose() { window.clearTimeout(timer); },
  };
}

function content(run) {
  const b = run.budget;
  const limit = attemptsLimit(run);
  const failures = Object.entries(run.failures || {});
  const calls = run.calls || [];
  const consumption = [
    ['Turns', run.turns, b.max_turns, String],
    ['Tool calls', run.toolCalls, b.max_tool_calls, String],
    ['Output', run.outputBytes, b.max_output_bytes, bytes],
  ];
  return [
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Run ', h('code', null, run.id)),
        h('p', { class: 'badges' }, runStatusBadge(run.status)))),
    run.status === 'exhausted'
      ? h('p', { class: 'notice notice-error' }, 'A budget of this run is spent: every further call under it is refused. Start a new run to go on.')
      : null,
    h('div', { class: 'grid-2' },
      h('section', { class: 'card', 'aria-labelledby': 'run-summary' }, h('h2', { id: 'run-summary' }, 'Summary'), facts([
        ['Principal', run.principal],
        ['Status', run.status],
        ['Started', when(run.startedAt)],
        ['Elapsed', elapsed(run)],
        ['Attempts per tool', `${limit} failed calls of one tool, then it is refused`],
      ])),
      h('section', { class: 'card', 'aria-labelledby': 'run-consumption' },
        h('h2', { id: 'run-consumption' }, 'Consumption'),
        h('table', { class: 'table', id: 'run-budget' },
          h('caption', { class: 'visually-hidden' }, 'Budget used'),
          h('thead', null, h('tr', null, ['Budget', 'Used', ''].map((c, i) => h('th', { scope: 'col' }, i === 2 ? h('span', { class: 'visually-hidden' }, 'Gauge') : c)))),
          h('tbody', null,
            consumption.map(([name, n, max, fmt]) => h('tr', { dataset: { budget: name } },
              h('th', { scope: 'row' }, name),
              h('td', { class: 'num' }, used(n, max, fmt)),
              h('td', null, meter(n, max, `${name} used`)))),
            h('tr', { dataset: { budget: 'Elapsed' } },
              h('th', { scope: 'row' }, 'Elapsed'),
              h('td', { class: 'num' }, elapsed(run)),
              h('td', null, run.status === 'open' ? meter(run.elapsedMs, b.timeout_ms, 'Elapsed time used') : null)))),
        h('h3', null, 'Failures per tool'),
        failures.length
          ? h('table', { class: 'table', id: 'run-failures' },
            h('caption', { class: 'visually-hidden' }, 'Failed calls per tool'),
            h('thead', null, h('tr', null, ['Tool', 'Failed calls', ''].map((c, i) => h('th', { scope: 'col' }, i === 2 ? h('span', { class: 'visually-hidden' }, 'Gauge') : c)))),
            h('tbody', null, failures.map(([tool, n]) => h('tr', { dataset: { tool } },
              h('th', { scope: 'row' }, h('code', null, tool)),
              h('td', { class: 'num' }, `${n} of ${limit}`, n >= limit ? ' (refused from now on)' : ''),
              h('td', null, meter(n, limit, `Failed calls of ${tool}`))))))
          : h('p', { class: 'muted' }, 'No failed call.'))),
    h('section', { class: 'card', 'aria-labelledby': 'run-calls' },
      h('h2', { id: 'run-calls' }, `Calls (${calls.length})`),
      calls.length
        ? h('table', { class: 'table', id: 'run-calls-table' },
          h('caption', { class: 'visually-hidden' }, 'Calls counted against this run, in order'),
          h('thead', null, h('tr', null, ['Finished', 'Tool', 'Outcome', 'Output'].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', null, calls.map((c) => h('tr', { dataset: { call: c.callId } },
            h('td', null, h('a', { href: `#/calls/${c.callId}` }, when(c.at))),
            h('th', { scope: 'row' }, h('code', null, c.tool)),
            h('td', null, c.failed ? badge('failed', 'danger') : badge('ok', 'ok')),
            h('td', { class: 'num' }, bytes(c.outputBytes))))))
        : h('p', { class: 'empty' }, 'No call has been counted against this run yet.')),
  ];
}
