// The audit log's key and action filters, applied over the entries fetched.
import { describe, expect, it } from 'vitest';
import { auditChoices, filterAudit } from '../src/audit';
import type { AuditEntry } from '../src/types';

const entry = (id: number, route: string, key: { id: number; name: string } | null, method = 'POST'): AuditEntry => ({
  id,
  at: '2024-05-01T10:00:00Z',
  username: 'ada',
  role: 'admin',
  method,
  route,
  path: `/api${route}`,
  status: 200,
  apiKey: key,
});

const entries = [
  entry(1, '/jobs/{id}/cancel', { id: 7, name: 'sonarr' }),
  entry(2, '/queue/pause-all', null),
  entry(3, '/jobs/{id}/cancel', null),
  entry(4, '/libraries/{id}', { id: 9, name: 'backup' }, 'DELETE'),
];

describe('audit filters', () => {
  it('keeps every entry with no filter', () => {
    expect(filterAudit(entries, { key: 'any', action: '' }).map((e) => e.id)).toEqual([1, 2, 3, 4]);
  });

  it('keeps one key, or what was done signed in without a key', () => {
    expect(filterAudit(entries, { key: 7, action: '' }).map((e) => e.id)).toEqual([1]);
    expect(filterAudit(entries, { key: 'none', action: '' }).map((e) => e.id)).toEqual([2, 3]);
  });

  it('keeps one action (method and route), combined with the key', () => {
    expect(filterAudit(entries, { key: 'any', action: 'POST /jobs/{id}/cancel' }).map((e) => e.id)).toEqual([1, 3]);
    expect(filterAudit(entries, { key: 'none', action: 'POST /jobs/{id}/cancel' }).map((e) => e.id)).toEqual([3]);
  });

  it('offers the keys by name and the actions the entries hold', () => {
    expect(auditChoices(entries)).toEqual({
      keys: [
        { id: 9, name: 'backup' },
        { id: 7, name: 'sonarr' },
      ],
      actions: ['DELETE /libraries/{id}', 'POST /jobs/{id}/cancel', 'POST /queue/pause-all'],
    });
  });
});
