// Display helpers: times, sizes, durations, and the colour of a consequence or an outcome.

import { badge } from './dom.js';

export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, {
    year: 'numeric', month: 'short', day: 'numeric',
    hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
}

/** "in 23 h", "in 5 min", "expired". */
export function until(iso) {
  const ms = new Date(iso).getTime() - Date.now();
  if (Number.isNaN(ms)) return '';
  if (ms <= 0) return 'expired';
  const min = Math.round(ms / 60000);
  if (min < 1) return 'in less than a minute';
  if (min < 90) return `in ${min} min`;
  const hours = Math.round(min / 60);
  if (hours < 48) return `in ${hours} h`;
  return `in ${Math.round(hours / 24)} days`;
}

export function bytes(n) {
  if (n === undefined || n === null) return '';
  if (n >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(n % (1024 * 1024) ? 1 : 0)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(n % 1024 ? 1 : 0)} KiB`;
  return `${n} B`;
}

export function duration(ms) {
  if (ms === undefined || ms === null) return '';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

export function label(snake) {
  return String(snake || '').replaceAll('_', ' ');
}

export function consequenceBadge(level) {
  const kind = { low: 'ok', medium: 'warn', high: 'danger' }[level] || 'neutral';
  return badge(`${level} consequence`, kind);
}

export function effectBadge(effect) {
  const kind = { read: 'neutral', write: 'info', delete: 'danger', side_effect: 'warn' }[effect] || 'neutral';
  return badge(label(effect), kind);
}

export function outcomeBadge(record) {
  if (record.errorKind) return badge(label(record.errorKind), 'danger');
  return badge('ok', 'ok');
}

export function statusBadge(status) {
  const kind = {
    pending: 'warn', approved: 'info', running: 'info', executed: 'ok',
    denied: 'danger', expired: 'neutral', indeterminate: 'danger',
  }[status] || 'neutral';
  return badge(status, kind);
}

export const CATEGORIES = ['filesystem', 'network', 'database', 'code_execution', 'external_api',
  'knowledge', 'communication', 'system'];
export const EFFECTS = ['read', 'write', 'delete', 'side_effect'];
export const CONSEQUENCES = ['low', 'medium', 'high'];
export const ISOLATIONS = ['none', 'standard', 'strict', 'restricted'];
export const PARAM_TYPES = ['string', 'integer', 'number', 'boolean', 'array', 'object'];

/** Where a call came from ({via, client, version}), for people; null when unknown. */
export function origin(o) {
  if (!o) return null;
  if (o.via === 'mcp') return ['MCP client', o.client, o.version].filter(Boolean).join(' ');
  if (o.via === 'rest') return o.client ? `REST (${o.client})` : 'REST';
  if (o.via === 'cli') return 'command line';
  return o.via;
}

/** Who cancelled a call (the audit log's cancelledBy), for people. */
export function canceller(who) {
  return {
    client: 'the client (it sent a cancellation)',
    client_disconnected: 'the client (it went away before the result)',
    'user:cli': 'the user on the command line (Ctrl-C)',
    shutdown: 'the server (shutting down, after the grace period)',
    timeout: 'the timeout (the call ran out of time)',
  }[who] || who;
}
