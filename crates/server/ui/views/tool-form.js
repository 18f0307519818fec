// The definition form (the fields of docs/tool-model.md#definition-fields): name with live
// snake_case validation, description, category, parameters (add/remove, announced), an
// output-schema JSON editor that validates as you type, constraints (timeout, max output,
// isolation, side effects, retries), governance (effect, consequence, safety level, confirmation,
// required permissions, tags, idempotent), version, and the `run` section for `http` and
// `command` tools. Fields the form does not show (metadata, depends_on, run.pagination,
// run.sandbox, …) are kept as stored when editing. A second mode takes the whole definition as
// TOML, JSON or YAML text (views/definition-text.js). The server has the last word: a 422 puts
// every problem next to the field it concerns.

import * as api from '../api.js';
import { h, replace, field, setFieldError, options, announce, toast } from '../dom.js';
import { CATEGORIES, CONSEQUENCES, EFFECTS, ISOLATIONS, PARAM_TYPES, label } from '../format.js';
import { definitionTextEditor } from './definition-text.js';

const NAME_RE = /^[a-z][a-z0-9_]*$/;
const RESERVED = ['execute', 'run', 'call', 'invoke'];
const SAFETY_LEVELS = [['', 'None'], ['safe', 'safe: low consequence'], ['cautious', 'cautious: medium consequence'], ['dangerous', 'dangerous: high consequence, confirmation']];
const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'];

/** The words of a list field: split on commas (and whitespace when `spaces`), empty ones left out. */
export function listOf(text, spaces = true) {
  return String(text || '').split(spaces ? /[\s,]+/ : /,/).map((x) => x.trim()).filter(Boolean);
}

/** What is wrong with a tool or parameter name, or '' if nothing. */
export function nameProblem(value, what = 'Name') {
  if (!value) return `${what} is required.`;
  if (value.length > 64) return `${what} is ${value.length} characters long; at most 64 are allowed.`;
  if (!NAME_RE.test(value)) {
    const suggestion = value.trim().replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase()
      .replace(/[^a-z0-9]+/g, '_').replace(/^[^a-z]+/, '').replace(/_+$/, '');
    const hint = suggestion && suggestion !== value && NAME_RE.test(suggestion) ? ` Try ${suggestion}.` : '';
    return `${what} must be snake_case: lowercase letters, digits and underscores, starting with a letter.${hint}`;
  }
  if (what === 'Name' && RESERVED.includes(value)) return `${value} is reserved; choose a name that says what the tool does.`;
  return '';
}

/** Parses the JSON editor's text: {value} or {error} (with line and column when known). */
export function parseJson(text) {
  if (!text.trim()) return { value: undefined };
  try {
    const value = JSON.parse(text);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      return { error: 'A schema must be a JSON object, such as {"type": "object"}.' };
    }
    return { value };
  } catch (e) {
    const m = /position (\d+)/.exec(e.message);
    let where = '';
    if (m) {
      const before = text.slice(0, Number(m[1]));
      const line = before.split('\n').length;
      const col = before.length - before.lastIndexOf('\n');
      where = ` (line ${line}, column ${col})`;
    }
    return { error: `Invalid JSON${where}: ${e.message.replace(/^JSON\.parse: /, '')}` };
  }
}

export async function render(page, { mode, name }, { navigate }) {
  let original = {};
  if (mode === 'edit') {
    const tool = await api.get(`/v1/tools/${api.enc(name)}`);
    if (tool.builtin) {
      replace(page,
        h('p', { class: 'crumbs' }, h('a', { href: '#/tools' }, 'Tools'), ' / ', h('a', { href: `#/tools/${name}` }, name), ' / edit'),
        h('h1', null, `${name} is built in`),
        h('p', { class: 'notice' }, 'Built-in tools are read-only. Define a tool with another name instead.'),
        h('p', null, h('a', { class: 'btn', href: `#/tools/${name}` }, `Back to ${name}`)));
      return null;
    }
    original = tool.definition || {};
  }
  const editing = mode === 'edit';
  const rawInputSchema = editing && original.input_schema !== undefined && !(original.parameters || []).length;

  // --- basics
  const nameInput = h('input', { type: 'text', name: 'name', value: original.name || '', autocomplete: 'off', spellcheck: 'false', required: true, readonly: editing, 'aria-required': 'true' });
  const description = h('textarea', { name: 'description', rows: '3', required: true, 'aria-required': 'true' });
  description.value = original.description || '';
  const category = h('select', { name: 'category' }, options(CATEGORIES.map((c) => [c, label(c)]), original.category || 'system'));

  nameInput.addEventListener('input', () => {
    setFieldError('f-name', nameInput.value ? nameProblem(nameInput.value) : '');
  });
  nameInput.addEventListener('blur', () => setFieldError('f-name', nameProblem(nameInput.value)));

  // --- parameters
  const paramList = h('ol', { class: 'param-list', id: 'param-list' });
  const paramLive = h('p', { id: 'params-live', class: 'visually-hidden', role: 'status', 'aria-live': 'polite', 'aria-atomic': 'true' });
  const rows = []; // {key, original, el, inputs}
  let nextKey = 0;

  function renumber() {
    rows.forEach((row, i) => {
      row.legend.textContent = `Parameter ${i + 1}`;
      row.remove.textContent = 'Remove';
      row.remove.setAttribute('aria-label', `Remove parameter ${i + 1}${row.name.value ? ` (${row.name.value})` : ''}`);
    });
    emptyNote.hidden = rows.length > 0;
  }

  function addParam(p = {}, focus = false) {
    const key = nextKey++;
    const id = (f) => `p-${key}-${f}`;
    const pName = h('input', { type: 'text', value: p.name || '', autocomplete: 'off', spellcheck: 'false' });
    const pType = h('select', null, options(PARAM_TYPES, p.type || 'string'));
    const pDesc = h('input', { type: 'text', value: p.description || '', autocomplete: 'off' });
    const pReq = h('input', { type: 'checkbox', checked: Boolean(p.required) });
    const pSchema = h('textarea', { rows: '3', class: 'code', spellcheck: 'false' });
    pSchema.value = p.schema ? JSON.stringify(p.schema, null, 2) : '';
    const legend = h('legend', null, '');
    const remove = h('button', { type: 'button', class: 'btn btn-small btn-quiet' }, 'Remove');
    const schemaField = field({ id: id('schema'), label: 'Schema (JSON)', control: pSchema, help: 'Items for an array, properties for an object.', className: 'field field-wide' });
    const rowError = h('p', { class: 'field-error', id: id('row-error'), hidden: true });
    const li = h('li', { class: 'param', dataset: { key: String(key) } },
      h('fieldset', null, legend,
        h('div', { class: 'param-grid' },
          field({ id: id('name'), label: 'Name', control: pName }),
          field({ id: id('type'), label: 'Type', control: pType }),
          field({ id: id('description'), label: 'Description', control: pDesc, className: 'field field-grow' }),
          h('div', { class: 'field field-check' }, pReq, h('label', { for: id('required') }, 'Required')),
          h('div', { class: 'field field-end' }, remove)),
        schemaField,
        rowError));
    pReq.id = id('required');
    const row = { key, original: p, el: li, legend, remove, name: pName, type: pType, description: pDesc, required: pReq, schema: pSchema, schemaField };
    const syncSchema = () => { schemaField.hidden = !['array', 'object'].includes(pType.value); };
    syncSchema();
    pType.addEventListener('change', syncSchema);
    pName.addEventListener('input', () => {
      setFieldError(id('name'), pName.value ? nameProblem(pName.value, 'Parameter name') : '');
      renumber();
    });
    remove.addEventListener('click', () => removeParam(row));
    rows.push(row);
    paramList.appendChild(li);
    renumber();
    if (focus) {
      pName.focus();
      paramLive.textContent = `Parameter ${rows.length} added. ${rows.length} parameter${rows.length === 1 ? '' : 's'} in total.`;
    }
  }

  function removeParam(row) {
    const i = rows.indexOf(row);
    if (i < 0) return;
    const what = row.name.value ? `Parameter ${row.name.value}` : `Parameter ${i + 1}`;
    rows.splice(i, 1);
    row.el.remove();
    renumber();
    paramLive.textContent = `${what} removed. ${rows.length} parameter${rows.length === 1 ? '' : 's'} left.`;
    // Keep keyboard focus in the list: the next row, the previous one, or the add button.
    const next = rows[i] || rows[i - 1];
    (next ? next.name : addButton).focus();
  }

  const addButton = h('button', { type: 'button', class: 'btn', id: 'add-param', onclick: () => addParam({}, true) }, '+ Add parameter');
  const emptyNote = h('p', { class: 'muted', id: 'params-empty' }, 'No parameters: the tool takes an empty object.');
  const paramsError = h('p', { class: 'field-error', id: 'params-error', hidden: true });

  // --- output schema: a JSON editor that validates as you type
  const outputSchema = h('textarea', {
    id: 'f-output-schema',
    name: 'output_schema',
    'aria-describedby': 'f-output-schema-help f-output-schema-error f-output-schema-status',
    rows: '8',
    class: 'code json-editor',
    spellcheck: 'false',
    autocapitalize: 'off',
    'aria-label': 'Output schema, JSON editor',
    'aria-multiline': 'true',
    placeholder: '{\n  "type": "object",\n  "properties": { "temperature": { "type": "number" } }\n}',
  });
  outputSchema.value = original.output_schema ? JSON.stringify(original.output_schema, null, 2) : '';
  const jsonStatus = h('p', { class: 'json-status', id: 'f-output-schema-status', role: 'status', 'aria-live': 'polite' });
  function checkJson() {
    const r = parseJson(outputSchema.value);
    if (r.error) {
      setFieldError('f-output-schema', r.error);
      jsonStatus.textContent = '';
      jsonStatus.className = 'json-status';
    } else {
      setFieldError('f-output-schema', '');
      jsonStatus.textContent = r.value === undefined ? 'Empty: outputs are not checked.' : 'Valid JSON.';
      jsonStatus.className = `json-status ${r.value === undefined ? '' : 'json-ok'}`;
    }
    return r;
  }
  outputSchema.addEventListener('input', checkJson);
  const formatButton = h('button', {
    type: 'button',
    class: 'btn btn-small',
    'aria-controls': 'f-output-schema',
    onclick: () => {
      const r = checkJson();
      if (r.value !== undefined) {
        outputSchema.value = JSON.stringify(r.value, null, 2);
        announce('Output schema formatted');
      }
    },
  }, 'Format JSON');

  // --- constraints
  const c = original.constraints || {};
  const timeout = h('input', { type: 'number', inputmode: 'numeric', min: '1000', max: '600000', step: '1', placeholder: '15000', value: c.timeout_ms ?? '' });
  const maxOutput = h('input', { type: 'number', inputmode: 'numeric', min: '1024', max: '104857600', step: '1', placeholder: '10485760', value: c.max_output_bytes ?? '' });
  const isolation = h('select', null, options([['', 'Default'], ...ISOLATIONS.map((i) => [i, i])], c.isolation || ''));
  const constraintsError = h('p', { class: 'field-error', id: 'constraints-error', hidden: true });
  const sideEffects = h('input', { type: 'checkbox', id: 'f-side-effects', checked: c.allow_side_effects !== false });
  sideEffects.setAttribute('aria-describedby', 'f-side-effects-help f-side-effects-error');
  const retryable = h('input', { type: 'checkbox', id: 'f-retryable', checked: c.retryable !== false });
  retryable.setAttribute('aria-describedby', 'f-retryable-help f-retryable-error');
  const maxAttempts = h('input', { type: 'number', inputmode: 'numeric', min: '1', max: '10', step: '1', placeholder: '3', value: c.max_attempts ?? '' });
  const idempotent = h('select', null, options([['', 'Default (yes for read tools)'], ['true', 'yes'], ['false', 'no']],
    original.idempotent === undefined ? '' : String(original.idempotent)));

  // --- governance
  const effect = h('select', null, options(EFFECTS.map((e) => [e, label(e)]), original.effect || 'read'));
  const consequence = h('select', null, options(CONSEQUENCES.map((x) => [x, x]), original.consequence || 'low'));
  const safety = h('select', null, options(SAFETY_LEVELS, original.safety_level || ''));
  const permissions = h('input', { type: 'text', value: (original.required_permissions || []).join(', '), autocomplete: 'off', spellcheck: 'false' });
  const tags = h('input', { type: 'text', value: (original.tags || []).join(', '), autocomplete: 'off' });
  const checkBox = (id, control, text, help) => h('div', { class: 'field field-check', dataset: { field: id } },
    control,
    h('label', { for: id }, text),
    h('p', { class: 'help', id: `${id}-help` }, help),
    h('p', { class: 'field-error', id: `${id}-error`, hidden: true }));
  const sideEffectsField = checkBox('f-side-effects', sideEffects, 'Side effects allowed', 'Unticked, a tool that writes, deletes or acts on the world is flagged.');
  const syncEffect = () => { sideEffectsField.hidden = effect.value === 'read'; };
  effect.addEventListener('change', syncEffect);
  syncEffect();

  // --- run: how the tool executes
  const r0 = original.run || {};
  const runKind = h('select', null, options([['', 'None: listed, not callable'], ['http', 'http: an HTTP API'], ['command', 'command: a program in the sandbox'],
    ...(r0.kind && !['http', 'command'].includes(r0.kind) ? [[r0.kind, `${r0.kind} (kept as stored)`]] : [])], r0.kind || ''));
  const httpR = r0.kind === 'http' ? r0 : {};
  const cmdR = r0.kind === 'command' ? r0 : {};
  const httpMethod = h('select', null, options(HTTP_METHODS, String(httpR.method || 'GET').toUpperCase()));
  const httpUrl = h('input', { type: 'url', value: httpR.url || '', autocomplete: 'off', spellcheck: 'false' });
  const httpQuery = h('input', { type: 'text', value: (httpR.query || []).join(', '), autocomplete: 'off', spellcheck: 'false' });
  const httpBody = h('input', { type: 'text', value: (httpR.body || []).join(', '), autocomplete: 'off', spellcheck: 'false' });
  const httpHeaders = h('textarea', { rows: '3', class: 'code', spellcheck: 'false', placeholder: '{ "Authorization": "Bearer ${env:WEATHER_TOKEN}" }' });
  httpHeaders.value = httpR.headers ? JSON.stringify(httpR.headers, null, 2) : '';
  const httpStatus = h('input', { type: 'text', value: (httpR.expect_status || []).join(', '), autocomplete: 'off', placeholder: '200, 201' });
  const httpResponse = h('input', { type: 'text', value: typeof httpR.response === 'object' ? JSON.stringify(httpR.response) : (httpR.response || ''), autocomplete: 'off', spellcheck: 'false', placeholder: '/data' });
  const cmdProgram = h('input', { type: 'text', value: cmdR.program || '', autocomplete: 'off', spellcheck: 'false', placeholder: '/usr/bin/wc' });
  const cmdArgs = h('textarea', { rows: '3', class: 'code', spellcheck: 'false', placeholder: '-l\n{path}' });
  cmdArgs.value = (cmdR.args || []).join('\n');
  const cmdEnv = h('input', { type: 'text', value: (cmdR.env || []).join(', '), autocomplete: 'off', spellcheck: 'false' });
  const cmdOutput = h('select', null, options([['', 'Default (text)'], ['text', 'text'], ['json', 'json']], cmdR.output || ''));
  const runError = h('p', { class: 'field-error', id: 'run-error', hidden: true });
  const httpGroup = h('fieldset', { class: 'run-kind', id: 'run-http' },
    h('legend', null, 'HTTP request'),
    h('div', { class: 'grid-name' },
      field({ id: 'f-http-url', label: 'URL', control: httpUrl, help: 'Absolute http(s) URL with {param} placeholders in the path, such as …/weather/{city}; scheme, host and port literal.' }),
      field({ id: 'f-http-method', label: 'Method', control: httpMethod })),
    h('div', { class: 'grid-3' },
      field({ id: 'f-http-query', label: 'Query parameters', control: httpQuery, help: 'Parameter names, comma-separated.' }),
      field({ id: 'f-http-body', label: 'Body parameters', control: httpBody, help: 'Parameter names sent as a JSON body (not with GET or HEAD).' }),
      field({ id: 'f-http-status', label: 'Expected status codes', control: httpStatus, help: 'Comma-separated; default any 2xx.' })),
    field({ id: 'f-http-response', label: 'Response (JSON pointer)', control: httpResponse, help: 'The part of the response to return, such as /data; empty for all of it.' }),
    field({ id: 'f-http-headers', label: 'Headers (JSON object)', control: httpHeaders, help: 'Secrets as ${env:NAME}, read from the server\'s environment.', className: 'field field-wide' }));
  const cmdGroup = h('fieldset', { class: 'run-kind', id: 'run-command' },
    h('legend', null, 'Command'),
    h('div', { class: 'grid-name' },
      field({ id: 'f-cmd-program', label: 'Program', control: cmdProgram, help: 'An absolute path; never a shell.' }),
      field({ id: 'f-cmd-output', label: 'Output', control: cmdOutput })),
    h('div', { class: 'grid-name' },
      field({ id: 'f-cmd-args', label: 'Arguments', control: cmdArgs, help: 'One per line; "{param}" alone on a line passes a parameter as one argument.' }),
      field({ id: 'f-cmd-env', label: 'Environment variables', control: cmdEnv, help: 'Names passed through from the server, comma-separated.' })));
  const syncRun = () => {
    httpGroup.hidden = runKind.value !== 'http';
    cmdGroup.hidden = runKind.value !== 'command';
  };
  runKind.addEventListener('change', syncRun);
  syncRun();

  const confirm = h('input', { type: 'checkbox', id: 'f-confirm', checked: Boolean(original.requires_confirmation) });
  confirm.setAttribute('aria-describedby', 'f-confirm-help f-confirm-error');
  const version = h('input', { type: 'text', placeholder: '1.0.0', value: original.version || '', autocomplete: 'off', spellcheck: 'false' });

  const summary = h('div', { class: 'error-summary', id: 'error-summary', tabindex: '-1', hidden: true });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'save' }, editing ? 'Save new version' : 'Create definition');
  const check = h('button', { type: 'button', class: 'btn', id: 'check' }, 'Check');

  // --- the two ways to write a definition: this form, or TOML / JSON / YAML text
  const textEditor = definitionTextEditor(editing ? { format: 'json', text: `${JSON.stringify(original, null, 2)}\n` } : {});
  const modeForm = h('input', { type: 'radio', name: 'mode', id: 'mode-form', value: 'form', checked: true });
  const modeText = h('input', { type: 'radio', name: 'mode', id: 'mode-text', value: 'text' });
  const modeSwitch = h('fieldset', { class: 'mode-switch' },
    h('legend', null, 'Write the definition with'),
    h('span', { class: 'mode-option' }, modeForm, h('label', { for: 'mode-form' }, 'the form')),
    h('span', { class: 'mode-option' }, modeText, h('label', { for: 'mode-text' }, 'TOML, JSON or YAML text')));
  const textMode = () => modeText.checked;

  const form = h('form', { class: 'def-form', novalidate: true, 'aria-labelledby': 'form-title' },
    summary,
    modeSwitch,
    textEditor.el,
    h('section', { class: 'card' },
      h('h2', null, 'Basics'),
      h('div', { class: 'grid-name' },
        field({ id: 'f-name', label: 'Name', control: nameInput, help: editing ? 'The name cannot change; create a new definition to rename.' : 'snake_case, at most 64 characters, for example get_weather.' }),
        field({ id: 'f-category', label: 'Category', control: category, help: 'The functional domain of the tool.' })),
      field({ id: 'f-description', label: 'Description', control: description, help: 'What the tool does and when to use it: this is how a model picks it.' })),
    h('section', { class: 'card' },
      h('fieldset', { class: 'params', 'aria-describedby': 'params-error' },
        h('legend', { class: 'h2' }, 'Parameters'),
        emptyNote,
        rawInputSchema
          ? h('p', { class: 'notice' }, 'This definition declares a raw input schema instead of parameters; it is kept as stored.')
          : [paramList, paramsError, h('div', { class: 'actions' }, addButton)],
        paramLive)),
    h('section', { class: 'card' },
      h('h2', null, 'Output schema'),
      h('div', { class: 'json-field', role: 'group', 'aria-labelledby': 'f-output-schema-label' },
        h('div', { class: 'field' },
          h('label', { for: 'f-output-schema', id: 'f-output-schema-label' }, 'Output schema (JSON Schema, optional)'),
          outputSchema,
          h('p', { class: 'help', id: 'f-output-schema-help' }, 'Checked against every result. Leave empty to accept any output.'),
          h('p', { class: 'field-error', id: 'f-output-schema-error', hidden: true }),
          h('div', { class: 'json-tools' }, jsonStatus, formatButton)))),
    h('section', { class: 'card' },
      h('fieldset', { class: 'constraints' },
        h('legend', { class: 'h2' }, 'Constraints'),
        h('div', { class: 'grid-3' },
          field({ id: 'f-timeout', label: 'Timeout (ms)', control: timeout, help: '1000–600000; default 15000.' }),
          field({ id: 'f-max-output', label: 'Max output (bytes)', control: maxOutput, help: '1 KiB–100 MiB; default 10 MiB. Larger output is truncated.' }),
          field({ id: 'f-isolation', label: 'Isolation level', control: isolation, help: 'none runs in-process; stronger levels run in a sandbox.' })),
        h('div', { class: 'grid-3' },
          checkBox('f-retryable', retryable, 'Retry retryable failures', 'Timeouts and unavailable upstreams are tried again, for idempotent tools only.'),
          field({ id: 'f-max-attempts', label: 'Max attempts', control: maxAttempts, help: '1–10; default 3.' }),
          field({ id: 'f-idempotent', label: 'Idempotent', control: idempotent, help: 'Safe to run twice; only idempotent tools are retried.' })),
        sideEffectsField,
        constraintsError)),
    h('section', { class: 'card' },
      h('fieldset', { class: 'run' },
        h('legend', { class: 'h2' }, 'How it runs'),
        field({ id: 'f-run-kind', label: 'Run kind', control: runKind, help: 'Without a run section the tool is listed and exported but a call is unavailable.' }),
        httpGroup,
        cmdGroup,
        runError)),
    h('section', { class: 'card' },
      h('h2', null, 'Governance and version'),
      h('div', { class: 'grid-3' },
        field({ id: 'f-effect', label: 'Effect', control: effect, help: 'What the tool does to data: read changes nothing.' }),
        field({ id: 'f-consequence', label: 'Consequence', control: consequence, help: 'Real-world impact if it goes wrong.' }),
        field({ id: 'f-safety', label: 'Safety level', control: safety, help: 'Shorthand; explicit consequence and confirmation win.' })),
      h('div', { class: 'grid-name' },
        field({ id: 'f-permissions', label: 'Required permissions', control: permissions, help: 'Comma-separated, such as tool.weather.read; the caller must hold all of them.' }),
        field({ id: 'f-tags', label: 'Tags', control: tags, help: 'Comma-separated keywords for search.' })),
      h('div', { class: 'field field-check', dataset: { field: 'f-confirm' } },
        confirm,
        h('label', { for: 'f-confirm' }, 'Requires confirmation'),
        h('p', { class: 'help', id: 'f-confirm-help' }, 'Every call waits for a person to approve it.'),
        h('p', { class: 'field-error', id: 'f-confirm-error', hidden: true })),
      field({ id: 'f-version', label: 'Version', control: version, help: 'Semantic version, for example 1.2.0 (optional).' })),
    h('div', { class: 'actions form-actions' },
      submit,
      check,
      h('a', { class: 'btn btn-quiet', href: editing ? `#/tools/${original.name}` : '#/tools' }, 'Cancel')));

  replace(page,
    h('p', { class: 'crumbs' }, h('a', { href: '#/tools' }, 'Tools'), ' / ',
      editing ? [h('a', { href: `#/tools/${original.name}` }, original.name), ' / edit'] : 'new definition'),
    h('h1', { id: 'form-title' }, editing ? `Edit ${original.name}` : 'New tool definition'),
    h('p', { class: 'lead' }, editing
      ? 'Saving stores a new version; the previous ones stay in the history.'
      : 'Define a custom tool. It is validated by the server before anything is stored.'),
    form);

  const formSections = [...form.querySelectorAll(':scope > section.card')].filter((el) => el !== textEditor.el);
  function syncMode() {
    formSections.forEach((el) => { el.hidden = textMode(); });
    textEditor.el.hidden = !textMode();
  }
  modeForm.addEventListener('change', syncMode);
  modeText.addEventListener('change', () => {
    syncMode();
    textEditor.check();
  });
  syncMode();

  if (!rawInputSchema) (original.parameters || []).forEach((p) => addParam(p));
  renumber();
  checkJson();

  // --- building the definition
  function collect() {
    const problems = [];
    const def = structuredClone(original);
    def.name = nameInput.value.trim();
    def.description = description.value.trim();
    def.category = category.value;
    const np = nameProblem(def.name);
    if (np) problems.push({ id: 'f-name', message: np });
    if (!rawInputSchema) {
      def.parameters = rows.map((row) => {
        const p = { ...row.original };
        p.name = row.name.value.trim();
        p.type = row.type.value;
        const d = row.description.value.trim();
        if (d) p.description = d; else delete p.description;
        if (row.required.checked) p.required = true; else delete p.required;
        const pn = nameProblem(p.name, 'Parameter name');
        if (pn) problems.push({ id: `p-${row.key}-name`, message: pn });
        if (['array', 'object'].includes(p.type) && row.schema.value.trim()) {
          const r = parseJson(row.schema.value);
          if (r.error) problems.push({ id: `p-${row.key}-schema`, message: r.error });
          else p.schema = r.value;
        } else {
          delete p.schema;
        }
        return p;
      });
      if (!def.parameters.length) delete def.parameters;
    }
    const out = parseJson(outputSchema.value);
    if (out.error) problems.push({ id: 'f-output-schema', message: out.error });
    else if (out.value === undefined) delete def.output_schema;
    else def.output_schema = out.value;
    const cons = { ...(original.constraints || {}) };
    setNumber(cons, 'timeout_ms', timeout.value);
    setNumber(cons, 'max_output_bytes', maxOutput.value);
    if (isolation.value) cons.isolation = isolation.value; else delete cons.isolation;
    if (!retryable.checked) cons.retryable = false;
    else if (original.constraints?.retryable !== undefined) cons.retryable = true;
    else delete cons.retryable;
    setNumber(cons, 'max_attempts', maxAttempts.value);
    if (effect.value !== 'read' && !sideEffects.checked) cons.allow_side_effects = false;
    else if (effect.value !== 'read' && original.constraints?.allow_side_effects !== undefined) cons.allow_side_effects = true;
    else if (effect.value !== 'read') delete cons.allow_side_effects;
    if (Object.keys(cons).length) def.constraints = cons; else delete def.constraints;
    if (confirm.checked || original.requires_confirmation !== undefined) def.requires_confirmation = confirm.checked;
    else delete def.requires_confirmation;
    setChoice(def, 'effect', effect.value, 'read', original);
    setChoice(def, 'consequence', consequence.value, 'low', original);
    if (safety.value) def.safety_level = safety.value; else delete def.safety_level;
    const perms = listOf(permissions.value);
    if (perms.length) def.required_permissions = perms; else delete def.required_permissions;
    const tagList = listOf(tags.value, false);
    if (tagList.length) def.tags = tagList; else delete def.tags;
    if (idempotent.value) def.idempotent = idempotent.value === 'true'; else delete def.idempotent;
    collectRun(def, problems);
    const v = version.value.trim();
    if (v) def.version = v; else delete def.version;
    return { def, problems };
  }

  function collectRun(def, problems) {
    const kind = runKind.value;
    if (!kind) {
      delete def.run;
      return;
    }
    if (kind !== 'http' && kind !== 'command') return; // another kind: kept as stored
    const run = r0.kind === kind ? { ...r0 } : { kind };
    const put = (key, value) => {
      if (value === undefined || value === '' || (Array.isArray(value) && !value.length)) delete run[key];
      else run[key] = value;
    };
    if (kind === 'http') {
      put('method', httpMethod.value === 'GET' && !r0.method ? undefined : httpMethod.value);
      put('url', httpUrl.value.trim());
      put('query', listOf(httpQuery.value));
      put('body', listOf(httpBody.value));
      const codes = listOf(httpStatus.value).map((x) => (/^\d+$/.test(x) ? Number(x) : x));
      put('expect_status', codes);
      const resp = httpResponse.value.trim();
      if (resp.startsWith('{')) {
        try {
          put('response', JSON.parse(resp));
        } catch (e) {
          problems.push({ id: 'f-http-response', message: `The response mapping is not a JSON object: ${e.message}` });
        }
      } else {
        put('response', resp);
      }
      if (httpHeaders.value.trim()) {
        const r = parseJson(httpHeaders.value);
        if (r.error) problems.push({ id: 'f-http-headers', message: r.error.replace('A schema', 'Headers') });
        else put('headers', r.value);
      } else {
        delete run.headers;
      }
    } else {
      put('program', cmdProgram.value.trim());
      put('args', cmdArgs.value.split('\n').map((x) => x.trim()).filter(Boolean));
      put('env', listOf(cmdEnv.value));
      put('output', cmdOutput.value);
    }
    def.run = run;
  }

  function fieldFor(path) {
    const m = /^parameters\[(\d+)\](?:\.([a-z_]+))?/.exec(path);
    if (m) {
      const row = rows[Number(m[1])];
      if (!row) return 'params-error';
      const f = m[2];
      if (['name', 'type', 'description', 'schema'].includes(f)) return `p-${row.key}-${f}`;
      if (f === 'required') return `p-${row.key}-required-error-holder`;
      return `p-${row.key}-row-error`;
    }
    if (path === 'name') return 'f-name';
    if (path === 'description' || path === 'title') return 'f-description';
    if (path === 'category') return 'f-category';
    if (path === 'parameters' || path === 'required' || path.startsWith('input_schema')) return 'params-error';
    if (path.startsWith('output_schema')) return 'f-output-schema';
    if (path === 'constraints.timeout_ms') return 'f-timeout';
    if (path === 'constraints.max_output_bytes') return 'f-max-output';
    if (path === 'constraints.isolation') return 'f-isolation';
    if (path.startsWith('constraints')) return 'constraints-error';
    if (path === 'requires_confirmation') return 'f-confirm';
    if (path === 'version') return 'f-version';
    const simple = {
      effect: 'f-effect', consequence: 'f-consequence', safety_level: 'f-safety', idempotent: 'f-idempotent',
      'constraints.retryable': 'f-retryable', 'constraints.max_attempts': 'f-max-attempts',
      'constraints.allow_side_effects': 'f-side-effects', 'run.kind': 'f-run-kind', 'run.method': 'f-http-method',
      'run.expect_status': 'f-http-status', 'run.output': 'f-cmd-output',
    };
    if (simple[path]) return simple[path];
    if (path.startsWith('required_permissions')) return 'f-permissions';
    if (path.startsWith('tags')) return 'f-tags';
    const prefixes = [['run.url', 'f-http-url'], ['run.query', 'f-http-query'], ['run.body', 'f-http-body'],
      ['run.header', 'f-http-headers'], ['run.response', 'f-http-response'], ['run.pointer', 'f-http-response'],
      ['run.program', 'f-cmd-program'], ['run.args', 'f-cmd-args'], ['run.env', 'f-cmd-env']];
    for (const [prefix, id] of prefixes) if (path.startsWith(prefix)) return id;
    if (path === 'run' || path.startsWith('run.')) return 'run-error';
    return null;
  }

  function clearErrors() {
    form.querySelectorAll('.field-error').forEach((el) => {
      el.hidden = true;
      el.textContent = '';
    });
    form.querySelectorAll('[aria-invalid]').forEach((el) => el.removeAttribute('aria-invalid'));
    summary.hidden = true;
    summary.className = 'error-summary';
    replace(summary);
  }

  /** Puts each problem next to its field; returns the summary entries. */
  function showProblems(problems) {
    const items = [];
    for (const p of problems) {
      let id = p.id || fieldFor(p.path || '');
      if (id && id.endsWith('-required-error-holder')) id = id.replace('-required-error-holder', '-row-error');
      let shown = false;
      if (id) {
        shown = setFieldError(id, p.message);
        if (!shown) {
          const el = document.getElementById(id);
          if (el) {
            el.textContent = el.hidden ? p.message : `${el.textContent} ${p.message}`;
            el.hidden = false;
            shown = true;
          }
        }
      }
      items.push({ id: shown ? id : null, path: p.path, message: p.message });
    }
    return items;
  }

  function showSummary(items, warnings = [], title) {
    replace(summary);
    summary.hidden = false;
    summary.className = items.length ? 'error-summary' : 'error-summary ok-summary';
    summary.appendChild(h('h2', null, title || `There ${items.length === 1 ? 'is 1 problem' : `are ${items.length} problems`} with this definition`));
    if (items.length) {
      summary.appendChild(h('ul', null, items.map((it) => h('li', null,
        it.id ? h('a', { href: `#${it.id}`, onclick: (e) => { e.preventDefault(); focusField(it.id); } }, it.message)
          : [it.path ? h('code', null, it.path) : null, it.path ? ' ' : null, it.message]))));
    }
    if (warnings.length) {
      summary.appendChild(h('p', { class: 'warn-title' }, `${warnings.length} warning${warnings.length === 1 ? '' : 's'} (saving is still allowed):`));
      summary.appendChild(h('ul', { class: 'warnings' }, warnings.map((w) => h('li', null, w.path ? [h('code', null, w.path), ' '] : null, w.message))));
    }
  }

  function focusField(id) {
    let el = document.getElementById(id);
    if (el && el.classList.contains('field-error')) {
      el = el.closest('fieldset, .card')?.querySelector('input, select, textarea, button') || el;
    }
    if (el) el.focus();
  }

  /** The text editor's verdict as summary entries (each links to the text area). */
  function textItems(issues) {
    return issues.map((e) => ({
      id: 't-text',
      message: `${e.line ? `Line ${e.line}, column ${e.column || 1}: ` : ''}${e.path ? `${e.path}: ` : ''}${e.message}`,
    }));
  }

  /** Checks the text; returns the definition it holds, or null after showing its problems. */
  async function checkedText() {
    const v = await textEditor.check();
    if (!v) {
      showSummary([{ id: 't-text', message: 'Paste or type a definition first.' }]);
      return null;
    }
    if (!v.valid) {
      showSummary(textItems(v.errors), v.warnings || []);
      return null;
    }
    if (editing && v.definition?.name !== original.name) {
      showSummary([{ id: 't-text', message: `The name must stay ${original.name}; create a new definition to rename.` }]);
      return null;
    }
    return v;
  }

  async function validateOnly() {
    clearErrors();
    if (textMode()) {
      const v = await checkedText();
      if (v) {
        showSummary([], v.warnings || [], 'The server accepts this definition');
        announce(`The definition is valid${v.warnings?.length ? ` with ${v.warnings.length} warnings` : ''}`);
      }
      summary.focus();
      return;
    }
    const { def, problems } = collect();
    if (problems.length) {
      showSummary(showProblems(problems));
      summary.focus();
      return;
    }
    try {
      const r = await api.post('/v1/tools/validate', def);
      const v = r.json;
      if (v.valid) {
        showSummary([], v.warnings || [], 'The server accepts this definition');
        announce(`The definition is valid${v.warnings?.length ? ` with ${v.warnings.length} warnings` : ''}`);
      } else {
        showSummary(showProblems(v.errors), v.warnings || []);
      }
      summary.focus();
    } catch (e) {
      showSummary([{ message: e.message }]);
      summary.focus();
    }
  }
  check.addEventListener('click', validateOnly);

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    if (textMode()) {
      const v = await checkedText();
      if (!v) {
        summary.focus();
        return;
      }
      await save(v.definition);
      return;
    }
    const { def, problems } = collect();
    if (problems.length) {
      showSummary(showProblems(problems));
      summary.focus();
      return;
    }
    await save(def);
  });

  async function save(def) {
    submit.disabled = true;
    submit.setAttribute('aria-busy', 'true');
    try {
      const r = editing
        ? await api.put(`/v1/tools/${api.enc(def.name)}`, def)
        : await api.post('/v1/tools', def);
      const warnings = r.json?.warnings || [];
      toast(`${editing ? 'Saved' : 'Created'} ${def.name}${r.json?.storedVersion ? ` (stored version ${r.json.storedVersion})` : ''}${warnings.length ? ` with ${warnings.length} warning${warnings.length === 1 ? '' : 's'}` : ''}`, 'ok');
      navigate(`#/tools/${def.name}`);
    } catch (e) {
      if (e.problems?.length) {
        showSummary(textMode() ? textItems(e.problems) : showProblems(e.problems), e.warnings);
      } else {
        const id = e.status === 409 ? 'f-name' : null;
        if (id) setFieldError(id, e.message);
        showSummary([{ id, message: e.message }]);
      }
      summary.focus();
    } finally {
      submit.disabled = false;
      submit.removeAttribute('aria-busy');
    }
  }
  return null;
}

/** Sets an enum field, leaving it out when it is the default and the stored definition had none. */
function setChoice(def, key, value, fallback, original) {
  if (value !== fallback || original[key] !== undefined) def[key] = value;
  else delete def[key];
}

function setNumber(obj, key, raw) {
  const text = String(raw).trim();
  if (!text) {
    delete obj[key];
    return;
  }
  const n = Number(text);
  obj[key] = Number.isFinite(n) ? n : text;
}
