// The audit log's filters: the query the server is asked, and the choices offered.
import { describe, expect, it } from 'vitest';
import { auditChoices, auditParams, NO_FILTER } from '../src/audit';
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
  it('asks for everything with no filter', () => {
    expect(auditParams(NO_FILTER)).toBe('');
  });

  it('asks the server for one user, one key or none, and one action', () => {
    expect(auditParams({ user: ' ada ', key: 7, action: '' })).toBe('user=ada&key=7');
    expect(auditParams({ user: '', key: 'none', action: 'POST /jobs/{id}/cancel' })).toBe(
      'key=none&action=POST+%2Fjobs%2F%7Bid%7D%2Fcancel',
    );
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

  it('keeps the choices seen before when a filter narrows the entries', () => {
    const before = auditChoices(entries);
    expect(auditChoices([entries[1]], before)).toEqual(before);
    expect(auditChoices([entry(5, '/schedule', null, 'PUT')], before).actions).toContain('PUT /schedule');
  });
});
