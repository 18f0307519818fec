// The REST API client: bearer token (kept in sessionStorage, never in a URL), JSON requests,
// errors as ApiError, and the event stream read through fetch (EventSource cannot send an
// Authorization header).

const TOKEN_KEY = 'toolgate.token';

export class ApiError extends Error {
  constructor(status, body) {
    const message = body?.error?.message || `The server answered ${status}`;
    super(message);
    this.status = status;
    this.kind = body?.error?.kind || 'error';
    this.problems = body?.error?.errors || [];
    this.warnings = body?.error?.warnings || [];
    this.body = body;
  }
}

export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(value) {
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage disabled: the token lives only as long as this page.
  }
  memoryToken = value || '';
}

let memoryToken = '';
const listeners = { unauthorized: [] };

/** Called with no arguments whenever the server answers 401. */
export function onUnauthorized(fn) {
  listeners.unauthorized.push(fn);
}

function headers(extra) {
  // Names this client, so calls made here say where they came from (audit log, approvals).
  const h = { Accept: 'application/json', 'X-Toolgate-Client': 'toolgate web UI', ...extra };
  const t = token() || memoryToken;
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

/** Sends one request; resolves with {status, json} for 2xx, rejects with ApiError otherwise. */
export async function request(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, { error: { kind: 'network', message: `The server cannot be reached (${e.message})` } });
  }
  const text = await response.text();
  let json = null;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
  }
  if (response.status === 401) listeners.unauthorized.forEach((fn) => fn());
  if (!response.ok) throw new ApiError(response.status, json);
  return { status: response.status, json, text };
}

export const get = (path) => request('GET', path).then((r) => r.json);
export const post = (path, body) => request('POST', path, body);
export const put = (path, body) => request('PUT', path, body);
export const del = (path) => request('DELETE', path);

/** `?a=1&b=2` from an object, leaving out empty values. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

export const enc = encodeURIComponent;

/**
 * Follows GET /v1/events: calls onEvent(name, data) for each event and onState('live' |
 * 'reconnecting' | 'signed-out') as the connection changes. Reconnects with backoff. Returns a
 * function that stops it.
 */
export function followEvents(onEvent, onState) {
  let stopped = false;
  let controller = null;
  let delay = 1000;

  async function run() {
    while (!stopped) {
      controller = new AbortController();
      try {
        const response = await fetch('/v1/events', {
          headers: headers({ Accept: 'text/event-stream' }),
          signal: controller.signal,
          cache: 'no-store',
        });
        if (response.status === 401) {
          onState('signed-out');
          listeners.unauthorized.forEach((fn) => fn());
          return;
        }
        if (!response.ok || !response.body) throw new Error(`status ${response.status}`);
        onState('live');
        delay = 1000;
        await readStream(response.body, onEvent);
      } catch (e) {
        if (stopped) return;
      }
      if (stopped) return;
      onState('reconnecting');
      await new Promise((resolve) => { window.setTimeout(resolve, delay); });
      delay = Math.min(delay * 2, 15000);
    }
  }

  run();
  return () => {
    stopped = true;
    if (controller) controller.abort();
  };
}

/** Parses a text/event-stream body (events separated by a blank line). */
async function readStream(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replaceAll('\r\n', '\n');
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const chunk = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = 'message';
      const data = [];
      for (const line of chunk.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? '' : line.slice(colon + 1);
        if (val.startsWith(' ')) val = val.slice(1);
        if (field === 'event') name = val;
        else if (field === 'data') data.push(val);
      }
      if (data.length === 0) continue;
      let parsed = data.join('\n');
      try {
        parsed = JSON.parse(parsed);
      } catch {
        // Not JSON: pass the text.
      }
      onEvent(name, parsed);
    }
  }
}
