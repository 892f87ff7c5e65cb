// Settings > API keys: named keys with a scope, shown once when made, their last use, revoked at once.
import { useState } from 'preact/hooks';
import { Alert, FieldError, invalidProps } from '../../components';
import { Options, TextField } from '../../widgets/Fields';
import { Table } from '../../widgets/Table';
import { formatDateTime } from '../../format';
import { useAction, useResource, useSave } from '../../hooks';
import { api } from '../../session';
import type { ApiKey, CreatedApiKey, KeyScope } from '../../types';

/** What each scope may do, in the words the selector and the list use. */
export const KEY_SCOPES: { scope: KeyScope; label: string; detail: string }[] = [
  { scope: 'integration', label: 'Integration', detail: 'the Sonarr/Radarr webhook and reading jobs' },
  { scope: 'read', label: 'Read', detail: 'every read and the live feed' },
  { scope: 'operate', label: 'Operate', detail: 'reads, job and queue actions, scans' },
  { scope: 'admin', label: 'Admin', detail: 'everything you may do, users and settings included' },
];

const scopeLabel = (scope: KeyScope) => KEY_SCOPES.find((s) => s.scope === scope)?.label ?? scope;

/** Named keys for scripts and the *arr applications: made here with a scope, shown once, revoked at once. */
export function ApiKeysSection() {
  const keys = useResource(() => api.apiKeys(), []);
  const [name, setName] = useState('');
  const [scope, setScope] = useState<KeyScope>('integration');
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const { busy, error, run } = useAction();
  const create = useSave([{ field: 'name' }, { field: 'scope' }]);

  const submit = async (event: Event) => {
    event.preventDefault();
    setCreated(null);
    const result = await create.save(() => api.createApiKey(name.trim(), scope));
    if (result) {
      setCreated(result);
      setName('');
      setScope('integration');
      await keys.reload();
    }
  };
  const revoke = async (key: ApiKey) => {
    if (!confirm(`Revoke the key “${key.name}”? Whatever uses it is refused from now on.`)) return;
    await run(() => api.revokeApiKey(key.id));
    await keys.reload();
  };

  const list = keys.data ?? [];
  return (
    <section class="card" aria-labelledby="keys-title">
      <h2 id="keys-title">API keys</h2>
      <p class="muted small">
        For scripts and Sonarr or Radarr: send a key as <code>X-Api-Key</code> or <code>Authorization: Bearer</code>. A key does what its scope
        allows and never more than the user who made it; give Sonarr and Radarr an Integration key.
      </p>
      <Alert message={keys.error} />
      <Alert message={error} />
      <Alert message={create.errors.form} />
      {created && (
        <div class="alert alert-ok" role="status">
          <p>
            Key “{created.name}” made. Copy it now: it is not shown again.
          </p>
          <input readOnly class="mono" aria-label="New API key" value={created.key} onFocus={(e) => e.currentTarget.select()} />
        </div>
      )}
      {list.length > 0 && (
        <Table columns={['Name', 'Scope', 'Key', 'Made by', 'Created', 'Last used']} actions>
          {list.map((key) => (
            <tr key={key.id}>
              <td data-label="Name">{key.name}</td>
              <td data-label="Scope">{scopeLabel(key.scope)}</td>
              <td data-label="Key" class="mono small">
                {key.prefix}…
              </td>
              <td data-label="Made by">{key.username ?? '?'}</td>
              <td data-label="Created">{formatDateTime(key.createdAt)}</td>
              <td data-label="Last used">{key.lastUsedAt ? formatDateTime(key.lastUsedAt) : 'Never'}</td>
              <td data-label="Actions">
                <button type="button" class="button button-danger" disabled={busy} onClick={() => void revoke(key)} aria-label={`Revoke key ${key.name}`}>
                  Revoke
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      <form class="form" onSubmit={(e) => void submit(e)}>
        <TextField label="Key name" value={name} maxLength={100} onValue={setName} required errorId="key-name-error" error={create.errors.fields.name} />
        <label class="field">
          <span>Scope</span>
          <select value={scope} onChange={(e) => setScope(e.currentTarget.value as KeyScope)} {...invalidProps('key-scope-error', create.errors.fields.scope)}>
            <Options items={KEY_SCOPES} value={(s) => s.scope} label={(s) => `${s.label}: ${s.detail}`} />
          </select>
          <FieldError id="key-scope-error" message={create.errors.fields.scope} />
        </label>
        {scope === 'admin' && (
          <p class="alert alert-error" role="alert">
            An Admin key can create users, change passwords and settings: whoever finds it owns this service. Give it only to a script that
            administers, never to Sonarr, Radarr or a dashboard.
          </p>
        )}
        <button type="submit" class="button button-primary" disabled={create.busy || name.trim() === ''}>
          {create.busy ? 'Creating…' : 'Create key'}
        </button>
      </form>
    </section>
  );
}
