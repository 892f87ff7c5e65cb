// The audit log's key and action filters: the server filters by user; the key and the action
// are chosen among, and applied to, the entries fetched.
import type { AuditEntry } from './types';

/** An entry's action as the filter names it: the method and the route as declared. */
export const auditAction = (entry: Pick<AuditEntry, 'method' | 'route'>) => `${entry.method} ${entry.route}`;

/** The key filter: any entry, those made without a key (signed in), or one key's by id. */
export type KeyFilter = 'any' | 'none' | number;

export interface AuditFilter {
  key: KeyFilter;
  /** '' for any action. */
  action: string;
}

export function filterAudit(entries: readonly AuditEntry[], filter: AuditFilter): AuditEntry[] {
  return entries.filter((entry) => {
    if (filter.key === 'none' && entry.apiKey) return false;
    if (typeof filter.key === 'number' && entry.apiKey?.id !== filter.key) return false;
    return filter.action === '' || auditAction(entry) === filter.action;
  });
}

/** The keys and actions the fetched entries hold, for the filters' choices. */
export function auditChoices(entries: readonly AuditEntry[]): { keys: { id: number; name: string }[]; actions: string[] } {
  const keys = new Map<number, string>();
  const actions = new Set<string>();
  for (const entry of entries) {
    if (entry.apiKey) keys.set(entry.apiKey.id, entry.apiKey.name);
    actions.add(auditAction(entry));
  }
  return {
    keys: [...keys].map(([id, name]) => ({ id, name })).sort((a, b) => a.name.localeCompare(b.name)),
    actions: [...actions].sort(),
  };
}
