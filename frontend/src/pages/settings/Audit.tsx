// Settings > Audit log: every change, who made it (a user, or a user's API key) and how it was
// answered, filtered by user, key and action (each asked of the server, over the whole log).
import { useEffect, useState } from 'preact/hooks';
import { Alert, Loading } from '../../components';
import { formatDateTime } from '../../format';
import { useResource } from '../../hooks';
import { api } from '../../session';
import { auditChoices, NO_FILTER, type AuditChoices, type AuditFilter } from '../../audit';
import { Table } from '../../widgets/Table';

/** What an answer's status says happened, in words. */
export function auditOutcome(status: number): string {
  if (status >= 200 && status < 300) return 'Done';
  if (status === 403) return 'Refused: role';
  if (status >= 500) return `Failed (${status})`;
  return `Refused (${status})`;
}

/** How many entries one look fetches: the server's largest page. */
export const AUDIT_PAGE = 500;

export function AuditSection() {
  const [user, setUser] = useState('');
  const [filter, setFilter] = useState<AuditFilter>(NO_FILTER);
  const audit = useResource(() => api.audit(1, AUDIT_PAGE, filter), [filter.user, filter.key, filter.action]);
  const entries = audit.data?.items ?? [];
  // The choices of every look so far: a filter that narrows the entries keeps the others offered.
  const [choices, setChoices] = useState<AuditChoices>({ keys: [], actions: [] });
  useEffect(() => setChoices((known) => auditChoices(entries, known)), [audit.data]);
  const filtered = filter.user !== '' || filter.key !== 'any' || filter.action !== '';

  const submit = (event: Event) => {
    event.preventDefault();
    setFilter({ ...filter, user: user.trim() });
  };

  return (
    <section class="card" aria-labelledby="audit-title">
      <div class="card-head">
        <h2 id="audit-title">Audit log</h2>
        <button type="button" class="button" onClick={() => void audit.reload()} disabled={audit.loading}>
          Reload
        </button>
      </div>
      <p class="muted small">
        Every change (job and queue actions, libraries, settings, users, licence), refusals included
        {audit.data ? `; ${audit.data.total} ${filtered ? 'match the filters' : 'in all'}, the latest ${entries.length} shown` : ''}.
      </p>
      <form class="filters" role="search" aria-label="Filter the audit log" onSubmit={submit}>
        <label class="field">
          <span>User</span>
          <input value={user} placeholder="Any user" onInput={(e) => setUser(e.currentTarget.value)} onBlur={() => setFilter({ ...filter, user: user.trim() })} />
        </label>
        <label class="field">
          <span>API key</span>
          <select
            value={String(filter.key)}
            onChange={(e) => {
              const value = e.currentTarget.value;
              setFilter({ ...filter, key: value === 'any' || value === 'none' ? value : Number(value) });
            }}
          >
            <option value="any">Any</option>
            <option value="none">None (signed in)</option>
            {choices.keys.map((key) => (
              <option key={key.id} value={String(key.id)}>
                {key.name}
              </option>
            ))}
          </select>
        </label>
        <label class="field field-grow">
          <span>Action</span>
          <select value={filter.action} onChange={(e) => setFilter({ ...filter, action: e.currentTarget.value })}>
            <option value="">Any</option>
            {choices.actions.map((action) => (
              <option key={action} value={action}>
                {action}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" class="button">
          Filter
        </button>
      </form>
      <Alert message={audit.error} />
      {!audit.data ? (
        audit.loading && <Loading what="the audit log" />
      ) : entries.length === 0 ? (
        <p class="muted">{filtered ? 'No entry matches the filters.' : 'Nothing has been changed yet.'}</p>
      ) : (
        <Table columns={['When', 'Who', 'Action', 'Result']}>
          {entries.map((entry) => (
            <tr key={entry.id}>
              <td data-label="When">{formatDateTime(entry.at)}</td>
              <td data-label="Who">
                {entry.username} <span class="muted small">({entry.role})</span>
                {entry.apiKey && <div class="muted small">key {entry.apiKey.name}</div>}
              </td>
              <td data-label="Action" class="mono small">
                {entry.method} {entry.path}
              </td>
              <td data-label="Result" class={entry.status >= 400 ? 'text-bad' : undefined}>
                {auditOutcome(entry.status)}
              </td>
            </tr>
          ))}
        </Table>
      )}
    </section>
  );
}
