// Tools: the list, with search and filters (category, effect, consequence, built-in or custom).

import * as api from '../api.js';
import { h, replace, options, badge, announce } from '../dom.js';
import { CATEGORIES, EFFECTS, CONSEQUENCES, label, consequenceBadge, effectBadge } from '../format.js';

// Filters survive leaving the page and coming back.
const state = { q: '', category: '', effect: '', consequence: '', builtin: '' };

export async function render(page) {
  const results = h('div', { class: 'results' });
  const status = h('p', { class: 'muted', id: 'tools-count', role: 'status' });

  const search = h('input', { type: 'search', id: 'tools-q', value: state.q, placeholder: 'Name or description', autocomplete: 'off' });
  const category = h('select', { id: 'tools-category' }, options([['', 'Any category'], ...CATEGORIES.map((c) => [c, label(c)])], state.category));
  const effect = h('select', { id: 'tools-effect' }, options([['', 'Any effect'], ...EFFECTS.map((c) => [c, label(c)])], state.effect));
  const consequence = h('select', { id: 'tools-consequence' }, options([['', 'Any consequence'], ...CONSEQUENCES.map((c) => [c, c])], state.consequence));
  const source = h('select', { id: 'tools-source' }, options([['', 'All sources'], ['true', 'Built-in only'], ['false', 'Custom only']], state.builtin));

  let timer = null;
  let seq = 0;
  async function load() {
    const mine = ++seq;
    const params = { ...state, limit: 500 };
    let list;
    try {
      list = await api.get(`/v1/tools${api.query(params)}`);
    } catch (e) {
      replace(results, h('p', { class: 'notice notice-error', role: 'alert' }, e.message));
      return;
    }
    if (mine !== seq) return;
    status.textContent = `${list.tools.length} tool${list.tools.length === 1 ? '' : 's'}`;
    if (list.tools.length === 0) {
      replace(results, h('p', { class: 'empty' }, 'No tool matches these filters.'));
      return;
    }
    replace(results, table(list.tools));
  }

  const onFilter = () => {
    state.q = search.value.trim();
    state.category = category.value;
    state.effect = effect.value;
    state.consequence = consequence.value;
    state.builtin = source.value;
    window.clearTimeout(timer);
    timer = window.setTimeout(load, 150);
  };
  for (const el of [search, category, effect, consequence, source]) {
    el.addEventListener(el === search ? 'input' : 'change', onFilter);
  }

  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter tools', onsubmit: (e) => { e.preventDefault(); onFilter(); } },
    filter('tools-q', 'Search', search, 'filter-wide'),
    filter('tools-category', 'Category', category),
    filter('tools-effect', 'Effect', effect),
    filter('tools-consequence', 'Consequence', consequence),
    filter('tools-source', 'Source', source));

  replace(page,
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Tools'),
        h('p', { class: 'lead' }, 'Every tool agents can call through this server. Built-in tools are read-only; custom definitions are stored with their history.')),
      h('a', { class: 'btn btn-primary', href: '#/new-tool' }, 'New definition')),
    filters,
    status,
    results);
  await load();
  return {
    onEvent(name, data) {
      if (name === 'definition' && data?.kind !== 'validated') {
        load();
        announce('The tool list changed');
      }
    },
    dispose() { window.clearTimeout(timer); },
  };
}

function filter(id, text, control, extra = '') {
  return h('div', { class: `field ${extra}` }, h('label', { for: id }, text), control);
}

function table(tools) {
  return h('table', { class: 'table' },
    h('caption', { class: 'visually-hidden' }, 'Tools'),
    h('thead', null, h('tr', null,
      h('th', { scope: 'col' }, 'Name'),
      h('th', { scope: 'col' }, 'Description'),
      h('th', { scope: 'col' }, 'Category'),
      h('th', { scope: 'col' }, 'Effect'),
      h('th', { scope: 'col' }, 'Consequence'),
      h('th', { scope: 'col' }, 'Source'))),
    h('tbody', null, tools.map((t) => h('tr', null,
      h('th', { scope: 'row' },
        h('a', { href: `#/tools/${t.name}`, class: 'tool-name' }, t.name),
        t.requiresConfirmation ? h('span', { class: 'confirm-mark', title: 'Requires confirmation' }, ' ', badge('confirm', 'warn')) : null),
      h('td', { class: 'desc' }, h('span', { class: 'clamp', title: t.description }, t.description)),
      h('td', null, label(t.category)),
      h('td', null, effectBadge(t.effect)),
      h('td', null, consequenceBadge(t.consequence)),
      h('td', null, t.builtin ? badge('built-in', 'neutral') : badge(t.version ? `custom · v${t.version}` : 'custom', 'info'))))));
}
