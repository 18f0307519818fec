// One tool: governance, parameters, schemas, constraints, permissions, version history and the
// provider exports. Custom definitions can be edited or deleted; built-ins are read-only.

import * as api from '../api.js';
import { h, replace, badge, jsonBlock, facts, toast, announce } from '../dom.js';
import { label, bytes, when, consequenceBadge, effectBadge } from '../format.js';

const FORMATS = [
  ['openai', 'OpenAI Chat Completions'],
  ['openai-responses', 'OpenAI Responses'],
  ['anthropic', 'Anthropic'],
  ['gemini', 'Gemini'],
  ['gemini-json-schema', 'Gemini (JSON Schema)'],
  ['mcp', 'MCP tools/list'],
];

export async function render(page, { name }, { navigate }) {
  const tool = await api.get(`/v1/tools/${api.enc(name)}`);
  const def = tool.definition || {};
  const limits = tool.limits || {};

  const actions = tool.builtin
    ? h('div', { class: 'actions' },
      h('p', { class: 'readonly-note' }, badge('built-in', 'neutral'), ' Built-in tools are read-only.'),
      h('a', { class: 'btn', href: `#/playground/${tool.name}` }, 'Try in playground'))
    : h('div', { class: 'actions' },
      h('a', { class: 'btn', href: `#/playground/${tool.name}` }, 'Try in playground'),
      h('a', { class: 'btn btn-primary', href: `#/tools/${tool.name}/edit` }, 'Edit definition'),
      h('button', { type: 'button', class: 'btn btn-danger', onclick: () => confirmDelete(tool.name, navigate) }, 'Delete'));

  const params = def.parameters || [];
  const paramSection = section('Parameters', params.length
    ? h('table', { class: 'table' },
      h('caption', { class: 'visually-hidden' }, `Parameters of ${tool.name}`),
      h('thead', null, h('tr', null, ['Name', 'Type', 'Required', 'Description', 'Default / values'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, params.map((p) => h('tr', null,
        h('th', { scope: 'row' }, h('code', null, p.name), p.sensitive ? [' ', badge('sensitive', 'warn')] : null),
        h('td', null, p.type),
        h('td', null, p.required ? 'yes' : 'no'),
        h('td', null, p.description || ''),
        h('td', null, [
          p.default !== undefined ? h('div', null, 'default ', h('code', null, JSON.stringify(p.default))) : null,
          p.enum ? h('div', null, 'one of ', h('code', null, p.enum.map((v) => JSON.stringify(v)).join(', '))) : null,
        ])))))
    : h('p', { class: 'muted' }, def.input_schema ? 'This tool declares a raw input schema (below).' : 'No parameters.'));

  const historyBox = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const exportBox = h('div', { class: 'export-output' });
  const exportButtons = FORMATS.map(([fmt, text]) => h('button', {
    type: 'button',
    class: 'seg',
    'aria-pressed': 'false',
    dataset: { format: fmt },
    onclick: () => showExport(fmt),
  }, text));

  async function showExport(fmt) {
    exportButtons.forEach((b) => b.setAttribute('aria-pressed', String(b.dataset.format === fmt)));
    replace(exportBox, h('p', { class: 'muted' }, 'Loading…'));
    try {
      const r = await api.get(`/v1/export/${fmt}${api.query({ tool: tool.name })}`);
      replace(exportBox,
        jsonBlock(r.document, `${fmt} export of ${tool.name}`),
        r.notes?.length ? h('ul', { class: 'notes' }, r.notes.map((n) => h('li', null, h('code', null, n.path), ' ', n.message))) : null);
    } catch (e) {
      replace(exportBox, h('p', { class: 'notice notice-error' }, e.message));
    }
  }

  replace(page,
    h('p', { class: 'crumbs' }, h('a', { href: '#/tools' }, 'Tools'), ' / ', tool.name),
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, tool.name),
        tool.title ? h('p', { class: 'subtitle' }, tool.title) : null,
        h('p', { class: 'badges' },
          badge(label(tool.category), 'neutral'), ' ', effectBadge(tool.effect), ' ', consequenceBadge(tool.consequence), ' ',
          tool.requiresConfirmation ? badge('requires confirmation', 'warn') : badge('no confirmation', 'neutral'))),
      actions),
    h('p', { class: 'lead' }, tool.description),
    h('div', { class: 'grid-2' },
      section('Overview', facts([
        ['Name', h('code', null, tool.name)],
        ['Version', tool.version || (tool.storedVersion ? '' : null)],
        ['Stored version', tool.storedVersion ? `#${tool.storedVersion}` : null],
        ['Source', tool.builtin ? 'built-in' : (tool.storedVersion ? 'custom, stored' : 'custom, from a definition file')],
        ['Tags', (tool.tags || []).length ? tool.tags.join(', ') : null],
        ['Implementation', implementation(tool, def)],
        ['Definition hash', h('code', { class: 'hash' }, tool.definitionHash)],
      ])),
      section('Constraints', facts([
        ['Timeout', limits.timeoutMs !== undefined ? `${limits.timeoutMs} ms` : null],
        ['Max output', limits.maxOutputBytes !== undefined ? bytes(limits.maxOutputBytes) : null],
        ['Isolation', limits.isolation],
        ['Max attempts', limits.maxAttempts],
        // A read-only tool has no side effects to allow: the row would only mislead.
        ['Side effects allowed', tool.effect === 'read' ? null : (def.constraints?.allow_side_effects === false ? 'no' : 'yes')],
      ]))),
    section('Permissions', (tool.requiredPermissions || []).length
      ? h('ul', { class: 'plain' }, tool.requiredPermissions.map((p) => h('li', null, h('code', null, p))))
      : h('p', { class: 'muted' }, 'No permission required.')),
    paramSection,
    section('Input schema', jsonBlock(tool.inputSchema, `Input schema of ${tool.name}`)),
    section('Output schema', tool.outputSchema ? jsonBlock(tool.outputSchema, `Output schema of ${tool.name}`) : h('p', { class: 'muted' }, 'No output schema: outputs are not checked.')),
    section('Version history', historyBox),
    section('Provider exports', h('div', null,
      h('div', { class: 'segmented', role: 'group', 'aria-label': 'Export format' }, exportButtons),
      exportBox)));

  if (tool.builtin || !tool.storedVersion) {
    replace(historyBox, h('p', { class: 'muted' }, tool.builtin ? 'Built-in tools have no stored history.' : 'Loaded from a definition file: no stored history.'));
  } else {
    try {
      const history = await api.get(`/v1/tools/${api.enc(tool.name)}/history`);
      replace(historyBox, h('table', { class: 'table' },
        h('caption', { class: 'visually-hidden' }, `Versions of ${tool.name}`),
        h('thead', null, h('tr', null, ['Stored version', 'Version', 'Saved', 'By', 'Hash'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, [...history.versions].reverse().map((v) => h('tr', null,
          h('th', { scope: 'row' }, `#${v.version}`, v.deletedAt ? [' ', badge('deleted', 'danger')] : null),
          h('td', null, v.definition?.version || ''),
          h('td', null, when(v.createdAt)),
          h('td', null, v.createdBy),
          h('td', null, h('code', { class: 'hash' }, v.definitionHash.slice(0, 12))))))));
    } catch (e) {
      replace(historyBox, h('p', { class: 'notice notice-error' }, e.message));
    }
  }
  await showExport('openai');
  return {
    onEvent(event, data) {
      if (event === 'definition' && data?.tool === tool.name && data?.kind !== 'validated') {
        announce(`${tool.name} changed`);
      }
    },
  };
}

// What runs a call, from the tool's `implemented` flag and its definition's run section.
function implementation(tool, def) {
  if (!tool.implemented) {
    return def.run ? `run kind ${def.run.kind}, not available on this server: calls answer unavailable` : 'none: calls answer unavailable';
  }
  if (def.run) return `run kind ${def.run.kind}`;
  return tool.builtin ? 'built-in (Rust)' : 'in-process handler';
}

function section(title, body) {
  return h('section', { class: 'card' }, h('h2', null, title), body);
}

function confirmDelete(name, navigate) {
  const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'delete-title' },
    h('h2', { id: 'delete-title' }, `Delete ${name}?`),
    h('p', null, 'Agents will no longer see or call it. Its stored history is kept.'),
    h('form', { method: 'dialog', class: 'actions' },
      h('button', { type: 'submit', value: 'cancel', class: 'btn', autofocus: true }, 'Cancel'),
      h('button', { type: 'submit', value: 'delete', class: 'btn btn-danger' }, `Delete ${name}`)));
  document.body.appendChild(dialog);
  dialog.addEventListener('close', async () => {
    const choice = dialog.returnValue;
    dialog.remove();
    if (choice !== 'delete') return;
    try {
      await api.del(`/v1/tools/${api.enc(name)}`);
      toast(`Deleted ${name}`, 'ok');
      navigate('#/tools');
    } catch (e) {
      toast(e.message, 'error');
    }
  });
  dialog.showModal();
}
