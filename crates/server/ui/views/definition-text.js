// The "paste TOML / JSON / YAML" editor of the definition form: a text area with a line gutter,
// checked by the server as you type (POST /v1/tools/validate with {format, text}); every problem
// is marked in the gutter at its line and listed below with its line, column and path (each item
// moves the caret to its line). Saving stores the definition the server read from the text.

import * as api from '../api.js';
import { h, replace, options } from '../dom.js';

const FORMATS = [['toml', 'TOML'], ['json', 'JSON'], ['yaml', 'YAML']];
const PLACEHOLDER = {
  toml: 'name = "get_weather"\ndescription = "Current weather for a city."\ncategory = "external_api"\n\n[[parameters]]\nname = "city"\ntype = "string"\nrequired = true',
  json: '{\n  "name": "get_weather",\n  "description": "Current weather for a city.",\n  "parameters": [{ "name": "city", "type": "string", "required": true }]\n}',
  yaml: 'name: get_weather\ndescription: Current weather for a city.\nparameters:\n  - name: city\n    type: string\n    required: true',
};

/**
 * Builds the editor. `initial` is {format, text}. Returns {el, focus(), check()}; check() resolves
 * to the server's verdict ({valid, errors, warnings, definition}) or null when the text is empty.
 */
export function definitionTextEditor(initial = {}) {
  const format = h('select', { id: 't-format', name: 'format', 'aria-describedby': 't-format-help' },
    options(FORMATS, initial.format || 'toml'));
  const text = h('textarea', {
    id: 't-text',
    name: 'definition_text',
    rows: '18',
    class: 'code text-editor',
    spellcheck: 'false',
    autocapitalize: 'off',
    wrap: 'off',
    'aria-describedby': 't-text-help t-text-status t-problems',
  });
  text.value = initial.text || '';
  const gutter = h('div', { class: 'gutter', 'aria-hidden': 'true' });
  const status = h('p', { class: 'json-status', id: 't-text-status', role: 'status', 'aria-live': 'polite' });
  const problems = h('ol', { class: 'text-problems', id: 't-problems', 'aria-label': 'Problems in the definition text' });
  let bad = new Map(); // line -> messages
  let seq = 0;
  let timer = null;
  let last = null;

  function lineCount() {
    return text.value.split('\n').length;
  }

  function drawGutter() {
    const n = Math.max(lineCount(), Number(text.rows));
    const lines = [];
    for (let i = 1; i <= n; i += 1) {
      lines.push(h('div', { class: bad.has(i) ? 'gutter-line gutter-bad' : 'gutter-line', title: bad.get(i)?.join('\n') || null },
        bad.has(i) ? `! ${i}` : String(i)));
    }
    replace(gutter, ...lines);
    gutter.scrollTop = text.scrollTop;
  }

  function goToLine(line, column = 1) {
    const all = text.value.split('\n');
    let offset = 0;
    for (let i = 0; i < line - 1 && i < all.length; i += 1) offset += all[i].length + 1;
    const lineText = all[line - 1] || '';
    const start = offset + Math.min(Math.max(column - 1, 0), lineText.length);
    text.focus();
    text.setSelectionRange(start, offset + lineText.length);
  }

  function where(issue) {
    if (!issue.line) return issue.path ? `${issue.path}: ` : '';
    return `Line ${issue.line}, column ${issue.column || 1}${issue.path ? ` (${issue.path})` : ''}: `;
  }

  function show(verdict) {
    bad = new Map();
    const errors = verdict?.errors || [];
    const warnings = verdict?.warnings || [];
    for (const e of errors) {
      if (e.line) bad.set(e.line, [...(bad.get(e.line) || []), e.message]);
    }
    const sorted = (list) => [...list].sort((a, b) => (a.line || 1e9) - (b.line || 1e9));
    const item = (issue, kind) => h('li', { class: kind },
      issue.line
        ? [h('button', { type: 'button', class: 'link-button', onclick: () => goToLine(issue.line, issue.column) }, where(issue).trim()), ' ']
        : where(issue),
      kind === 'text-warning' ? 'Warning: ' : null,
      issue.message);
    replace(problems, ...sorted(errors).map((e) => item(e, 'text-error')), ...sorted(warnings).map((w) => item(w, 'text-warning')));
    problems.hidden = !errors.length && !warnings.length;
    if (!verdict) {
      status.textContent = 'Empty: paste or type a definition.';
      status.className = 'json-status';
      text.removeAttribute('aria-invalid');
    } else if (errors.length) {
      status.textContent = `${errors.length} problem${errors.length === 1 ? '' : 's'} found.`;
      status.className = 'json-status json-bad';
      text.setAttribute('aria-invalid', 'true');
    } else {
      status.textContent = `Valid definition${warnings.length ? ` with ${warnings.length} warning${warnings.length === 1 ? '' : 's'}` : ''}.`;
      status.className = 'json-status json-ok';
      text.removeAttribute('aria-invalid');
    }
    drawGutter();
  }

  async function check() {
    const mine = ++seq;
    if (!text.value.trim()) {
      last = null;
      show(null);
      return null;
    }
    let verdict;
    try {
      const r = await api.post('/v1/tools/validate', { format: format.value, text: text.value });
      verdict = r.json;
    } catch (e) {
      verdict = { valid: false, errors: [{ path: '', code: 'request', message: e.message }], warnings: [] };
    }
    if (mine !== seq) return last; // a newer check is under way
    last = verdict;
    show(verdict);
    return verdict;
  }

  function schedule() {
    clearTimeout(timer);
    drawGutter();
    timer = setTimeout(check, 250);
  }

  text.addEventListener('input', schedule);
  text.addEventListener('scroll', () => { gutter.scrollTop = text.scrollTop; });
  format.addEventListener('change', () => {
    text.placeholder = PLACEHOLDER[format.value];
    check();
  });
  text.placeholder = PLACEHOLDER[format.value];

  const el = h('section', { class: 'card text-mode', id: 'text-mode' },
    h('h2', null, 'Definition text'),
    h('div', { class: 'field' },
      h('label', { for: 't-format' }, 'Format'),
      format,
      h('p', { class: 'help', id: 't-format-help' }, 'The same document as a definition file; see docs/tool-model.md.')),
    h('div', { class: 'field' },
      h('label', { for: 't-text' }, 'Definition (TOML, JSON or YAML)'),
      h('div', { class: 'text-editor-wrap' }, gutter, text),
      h('p', { class: 'help', id: 't-text-help' }, 'Checked by the server as you type; every problem is marked at its line and listed below.'),
      status,
      problems));
  problems.hidden = true;
  show(null);
  return { el, focus: () => text.focus(), check: () => { clearTimeout(timer); return check(); } };
}
