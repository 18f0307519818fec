// Playground: pick a tool, fill a form generated from its input schema, call it through the
// pipeline and see the result envelope. A call that needs a yes shows its approval and follows it.

import * as api from '../api.js';
import { h, replace, options, jsonBlock, announce, setFieldError } from '../dom.js';
import { duration, label, consequenceBadge, effectBadge, statusBadge } from '../format.js';

export async function render(page, { name }, { navigate }) {
  const list = await api.get('/v1/tools?limit=500');
  const picker = h('select', { id: 'pg-tool' }, options([['', 'Choose a tool…'], ...list.tools.map((t) => [t.name, t.name])], name || ''));
  picker.addEventListener('change', () => navigate(picker.value ? `#/playground/${picker.value}` : '#/playground'));
  const formBox = h('div');
  const resultBox = h('section', { class: 'card result-card', id: 'pg-result', 'aria-labelledby': 'pg-result-title', hidden: true });
  const placeholder = h('p', { class: 'empty' }, 'The result envelope appears here.');
  let waitingFor = null;

  replace(page,
    h('div', { class: 'page-head' },
      h('div', null,
        h('h1', null, 'Playground'),
        h('p', { class: 'lead' }, 'Call any tool you can see, through the same pipeline agents use: validation, permissions, approvals, limits and the audit log.'))),
    h('div', { class: 'pg-layout' },
      h('div', null,
        h('div', { class: 'card' }, h('div', { class: 'field' }, h('label', { for: 'pg-tool' }, 'Tool'), picker)),
        formBox),
      h('div', null, placeholder, resultBox)));

  if (!name) {
    replace(formBox, h('p', { class: 'empty' }, 'Choose a tool to see its arguments.'));
    return null;
  }
  const tool = await api.get(`/v1/tools/${api.enc(name)}`);
  const schema = tool.inputSchema || {};
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  const fields = [];

  for (const [key, prop] of Object.entries(props)) {
    fields.push(makeField(key, prop, required.has(key)));
  }
  const preview = h('pre', { class: 'json', id: 'pg-args', tabindex: '0', 'aria-label': 'Arguments as JSON' }, '{}');
  const reason = h('input', { type: 'text', id: 'pg-reason', autocomplete: 'off', placeholder: 'Shown to whoever approves the call' });
  const callButton = h('button', { type: 'submit', class: 'btn btn-primary', id: 'pg-call' }, `Call ${tool.name}`);

  function collect(show) {
    const args = {};
    let ok = true;
    for (const f of fields) {
      const r = f.read();
      if (show || !r.error) setFieldError(f.id, r.error || '');
      if (r.error) ok = false;
      else if (r.value !== undefined) args[f.key] = r.value;
    }
    return { args, ok };
  }
  function updatePreview() {
    const { args } = collect();
    preview.textContent = JSON.stringify(args, null, 2);
  }

  const form = h('form', { class: 'card', novalidate: true, 'aria-labelledby': 'pg-args-title' },
    h('div', { class: 'page-head compact' },
      h('h2', { id: 'pg-args-title' }, 'Arguments'),
      h('p', { class: 'badges' }, consequenceBadge(tool.consequence), ' ', effectBadge(tool.effect), ' ',
        tool.requiresConfirmation ? h('span', { class: 'badge badge-warn' }, 'requires confirmation') : null)),
    h('p', { class: 'muted clamp', title: tool.description }, tool.description),
    fields.length ? h('div', null, fields.map((f) => f.el)) : h('p', { class: 'muted' }, 'This tool takes no arguments.'),
    h('div', { class: 'field' }, h('label', { for: 'pg-reason' }, 'Reason (optional)'), reason),
    h('details', { class: 'preview' }, h('summary', null, 'Arguments as JSON'), preview),
    h('div', { class: 'actions' }, callButton));
  form.addEventListener('input', updatePreview);
  form.addEventListener('change', updatePreview);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const { args, ok } = collect(true);
    if (!ok) {
      const bad = form.querySelector('[aria-invalid="true"]');
      if (bad) bad.focus();
      return;
    }
    callButton.disabled = true;
    callButton.setAttribute('aria-busy', 'true');
    const body = { arguments: args };
    if (reason.value.trim()) body.reason = reason.value.trim();
    try {
      const r = await api.post(`/v1/tools/${api.enc(tool.name)}/call`, body);
      if (r.status === 202) {
        waitingFor = r.json.approval.id;
        showPending(r.json.approval);
      } else {
        waitingFor = null;
        showEnvelope(r.json);
      }
    } catch (e) {
      showFailure(e);
    } finally {
      callButton.disabled = false;
      callButton.removeAttribute('aria-busy');
    }
  });
  replace(formBox, form);
  updatePreview();

  function showEnvelope(env, heading) {
    placeholder.hidden = true;
    resultBox.hidden = false;
    const ok = !env.errorKind;
    replace(resultBox,
      h('h2', { id: 'pg-result-title' }, heading || 'Result'),
      h('p', { class: `outcome ${ok ? 'outcome-ok' : 'outcome-error'}`, id: 'pg-outcome' },
        ok ? 'Succeeded' : `Failed: ${label(env.errorKind)}`,
        env.durationMs !== undefined ? ` · ${duration(env.durationMs)}` : '',
        env.attempts !== undefined ? ` · ${env.attempts} attempt${env.attempts === 1 ? '' : 's'}` : '',
        env.truncated ? ' · truncated' : ''),
      ok ? null : h('p', { class: 'notice notice-error' }, env.error),
      h('h3', null, 'Envelope'),
      jsonBlock(env, 'Result envelope'),
      env.callId ? h('p', null, h('a', { href: `#/calls/${env.callId}` }, 'Open its audit entry')) : null);
    announce(ok ? `${tool.name} succeeded` : `${tool.name} failed: ${label(env.errorKind)}`);
  }

  function showPending(approval) {
    placeholder.hidden = true;
    resultBox.hidden = false;
    replace(resultBox,
      h('h2', { id: 'pg-result-title' }, 'Waiting for approval'),
      h('p', { class: 'outcome outcome-wait', id: 'pg-outcome' }, statusBadge(approval.status), ` ${tool.name} needs a yes before it runs.`),
      h('p', null, 'Approval ', h('code', null, approval.id), ' is in the ', h('a', { href: '#/approvals' }, 'approvals inbox'), '. This page shows the result once it is decided.'));
    announce(`${tool.name} is waiting for approval`);
  }

  function showFailure(e) {
    placeholder.hidden = true;
    resultBox.hidden = false;
    replace(resultBox,
      h('h2', { id: 'pg-result-title' }, 'The request failed'),
      h('p', { class: 'notice notice-error', id: 'pg-outcome' }, e.message));
    announce('The request failed');
  }

  return {
    async onEvent(event, data) {
      if (event !== 'approval' || !waitingFor || data?.id !== waitingFor) return;
      const a = await api.get(`/v1/approvals/${api.enc(waitingFor)}`);
      if (a.status === 'pending' || a.status === 'approved' || a.status === 'running') {
        if (a.status !== 'pending') showPending(a);
        return;
      }
      waitingFor = null;
      placeholder.hidden = true;
      if (a.result) showEnvelope(a.result, `Result (approved by ${a.decidedBy || 'someone'})`);
      else {
        resultBox.hidden = false;
        replace(resultBox,
          h('h2', { id: 'pg-result-title' }, `Approval ${a.status}`),
          h('p', { class: 'outcome outcome-error', id: 'pg-outcome' }, statusBadge(a.status), ` ${a.decisionReason ? `Reason: ${a.decisionReason}` : 'The call did not run.'}`));
        announce(`The ${tool.name} call was ${a.status}`);
      }
    },
  };
}

/** One input for a property of the input schema: {key, id, el, read() → {value}|{error}}. */
function makeField(key, prop, isRequired) {
  const id = `arg-${key}`;
  const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== 'null') : prop.type;
  const helpText = [prop.description, prop.default !== undefined ? `Default: ${JSON.stringify(prop.default)}` : null]
    .filter(Boolean).join(' · ');
  let control;
  let read;
  if (Array.isArray(prop.enum)) {
    control = h('select', null, options([['', isRequired ? 'Choose…' : '(not set)'], ...prop.enum.map((v, i) => [String(i), JSON.stringify(v).replace(/^"|"$/g, '')])], ''));
    read = () => {
      if (control.value === '') return isRequired ? { error: `${key} is required.` } : {};
      return { value: prop.enum[Number(control.value)] };
    };
  } else if (type === 'boolean') {
    control = h('select', null, options([['', '(not set)'], ['true', 'true'], ['false', 'false']], ''));
    read = () => {
      if (control.value === '') return isRequired ? { error: `${key} is required.` } : {};
      return { value: control.value === 'true' };
    };
  } else if (type === 'integer' || type === 'number') {
    control = h('input', { type: 'number', step: type === 'integer' ? '1' : 'any', placeholder: prop.default !== undefined ? String(prop.default) : '' });
    if (prop.minimum !== undefined) control.min = String(prop.minimum);
    if (prop.maximum !== undefined) control.max = String(prop.maximum);
    read = () => {
      const t = control.value.trim();
      if (!t) return isRequired ? { error: `${key} is required.` } : {};
      const n = Number(t);
      if (!Number.isFinite(n)) return { error: `${key} must be a number.` };
      if (type === 'integer' && !Number.isInteger(n)) return { error: `${key} must be a whole number.` };
      return { value: n };
    };
  } else if (type === 'string') {
    const long = (prop.maxLength || 0) > 200 || /content|text|body|markdown/.test(key);
    control = long ? h('textarea', { rows: '4' }) : h('input', { type: 'text', autocomplete: 'off', placeholder: prop.default !== undefined ? String(prop.default) : '' });
    read = () => {
      const t = control.value;
      if (!t) return isRequired ? { error: `${key} is required.` } : {};
      return { value: t };
    };
  } else {
    control = h('textarea', { rows: '4', class: 'code', spellcheck: 'false', 'aria-label': `${key} (JSON)` });
    read = () => {
      const t = control.value.trim();
      if (!t) return isRequired ? { error: `${key} is required.` } : {};
      try {
        return { value: JSON.parse(t) };
      } catch (e) {
        return { error: `${key} is not valid JSON: ${e.message}` };
      }
    };
  }
  control.id = id;
  const described = [`${id}-error`];
  if (helpText) described.unshift(`${id}-help`);
  control.setAttribute('aria-describedby', described.join(' '));
  if (isRequired) control.setAttribute('aria-required', 'true');
  const el = h('div', { class: 'field' },
    h('label', { for: id }, key, isRequired ? h('span', { class: 'req', 'aria-hidden': 'true' }, ' *') : null,
      h('span', { class: 'muted small' }, ` ${type || 'any'}${isRequired ? ', required' : ''}`)),
    control,
    helpText ? h('p', { class: 'help', id: `${id}-help` }, helpText) : null,
    h('p', { class: 'field-error', id: `${id}-error`, hidden: true }));
  return { key, id, el, read };
}
