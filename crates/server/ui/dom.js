// DOM helpers. Every element is built with createElement and text nodes: data from the server
// is never parsed as HTML, so a tool description cannot inject markup or script.

/** Builds an element: h('a', {href: '#/x', class: 'btn'}, 'text', child, [more]). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith('on') && typeof value === 'function') {
        el.addEventListener(key.slice(2).toLowerCase(), value);
      } else if (key === 'dataset') {
        Object.assign(el.dataset, value);
      } else if (key === 'value' && 'value' in el) {
        el.value = value;
      } else if (key === 'checked' || key === 'selected') {
        el[key] = Boolean(value);
      } else if (value === true) {
        el.setAttribute(key, '');
      } else {
        el.setAttribute(key, String(value));
      }
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Says something to screen-reader users (the page's polite live region). */
export function announce(text) {
  const region = document.getElementById('announcer');
  if (!region) return;
  // Clearing first makes the same message be read again.
  region.textContent = '';
  window.setTimeout(() => { region.textContent = text; }, 30);
}

/** A short-lived visible notice (also read out: the container is a live region). */
export function toast(text, kind = 'info') {
  const box = document.getElementById('toasts');
  if (!box) return;
  const note = h('div', { class: `toast toast-${kind}` }, text);
  box.appendChild(note);
  window.setTimeout(() => note.remove(), 6000);
}

let uid = 0;
/** A unique id for label/field pairs. */
export function nextId(prefix) {
  uid += 1;
  return `${prefix}-${uid}`;
}

/** A labelled form field: the label is bound to the control with `for`. */
export function field({ id, label, control, help, error = true, className = 'field' }) {
  control.id = id;
  const described = [];
  let helpEl = null;
  if (help) {
    helpEl = h('p', { class: 'help', id: `${id}-help` }, help);
    described.push(helpEl.id);
  }
  const errorEl = error ? h('p', { class: 'field-error', id: `${id}-error`, hidden: true }) : null;
  if (errorEl) described.push(errorEl.id);
  if (described.length) control.setAttribute('aria-describedby', described.join(' '));
  return h('div', { class: className, dataset: { field: id } },
    h('label', { for: id }, label),
    control,
    helpEl,
    errorEl);
}

/** Shows (or clears, with an empty message) the error next to the field with this id. */
export function setFieldError(id, message) {
  const control = document.getElementById(id);
  const errorEl = document.getElementById(`${id}-error`);
  if (!control || !errorEl) return false;
  if (message) {
    errorEl.textContent = message;
    errorEl.hidden = false;
    control.setAttribute('aria-invalid', 'true');
  } else {
    errorEl.textContent = '';
    errorEl.hidden = true;
    control.removeAttribute('aria-invalid');
  }
  return true;
}

/** `<select>` options from values, or from [value, label] pairs. */
export function options(values, selected) {
  return values.map((v) => {
    const [value, label] = Array.isArray(v) ? v : [v, v];
    return h('option', { value, selected: value === selected }, label);
  });
}

/** A small coloured label. */
export function badge(text, kind = 'neutral', title) {
  return h('span', { class: `badge badge-${kind}`, title }, text);
}

/** A block of JSON, pretty-printed. */
export function jsonBlock(value, label) {
  return h('pre', { class: 'json', tabindex: '0', 'aria-label': label || 'JSON' },
    JSON.stringify(value, null, 2));
}

/** A definition list from [term, description] pairs (null descriptions are skipped). */
export function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs
    .filter(([, d]) => d !== null && d !== undefined && d !== '')
    .map(([t, d]) => [h('dt', null, t), h('dd', null, d)]));
}
