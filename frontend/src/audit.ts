// The audit log's filters: user, API key and action, each applied by the server (GET /audit's
// `user`, `key` and `action`) over the whole log. The key and action choices are those of the
// entries fetched so far, kept as filters narrow what is fetched.
import type { AuditEntry } from './types';

/** An entry's action as the filter names it: the method and the route as declared. */
export const auditAction = (entry: Pick<AuditEntry, 'method' | 'route'>) => `${entry.method} ${entry.route}`;

/** The key filter: any entry, those made without a key (signed in), or one key's by id. */
export type KeyFilter = 'any' | 'none' | number;

export interface AuditFilter {
  /** '' for any user. */
  user: string;
  key: KeyFilter;
  /** '' for any action. */
  action: string;
}

export const NO_FILTER: AuditFilter = { user: '', key: 'any', action: '' };

/** The query parameters GET /audit takes for `filter` (each left out when it keeps any). */
export function auditParams(filter: AuditFilter): string {
  const params = new URLSearchParams();
  const user = filter.user.trim();
  if (user !== '') params.set('user', user);
  if (filter.key !== 'any') params.set('key', String(filter.key));
  if (filter.action !== '') params.set('action', filter.action);
  return params.toString();
}

export interface AuditChoices {
  keys: { id: number; name: string }[];
  actions: string[];
}

/** The keys and actions `entries` hold, added to `known` (those seen before), sorted. */
export function auditChoices(entries: readonly AuditEntry[], known: AuditChoices = { keys: [], actions: [] }): AuditChoices {
  const keys = new Map<number, string>(known.keys.map((key) => [key.id, key.name]));
  const actions = new Set<string>(known.actions);
  for (const entry of entries) {
    if (entry.apiKey) keys.set(entry.apiKey.id, entry.apiKey.name);
    actions.add(auditAction(entry));
  }
  return {
    keys: [...keys].map(([id, name]) => ({ id, name })).sort((a, b) => a.name.localeCompare(b.name)),
    actions: [...actions].sort(),
  };
}
