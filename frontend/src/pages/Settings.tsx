import { useEffect, useState } from 'preact/hooks';
import { Alert, Badge, Loading } from '../components';
import { formatDateTime, titleCase } from '../format';
import { useAction, useResource, useRole, type Resource } from '../hooks';
import { allows, api, logout } from '../session';
import type {
  ApiKey,
  Connection,
  ConnectionKind,
  CreatedApiKey,
  KeyScope,
  License,
  NotificationEvent,
  NotificationKind,
  NotificationTarget,
  Settings as SettingsData,
} from '../types';

export function Settings() {
  const role = useRole();
  return (
    <div class="page">
      <header class="page-head">
        <h1>Settings</h1>
      </header>
      {allows(role, 'admin') ? <AdminSettings /> : <AccountSection />}
    </div>
  );
}

/** What only an administrator may see and change (the server refuses it to others). */
function AdminSettings() {
  const settings = useResource(() => api.settings(), []);
  return (
    <>
      <div class="grid grid-2">
        <LicenseSection />
        <div class="stack-gap">
          <GeneralSection settings={settings} />
          <EnrollmentSection settings={settings} />
          <AccountSection />
        </div>
      </div>
      <ApiKeysSection />
      <NotificationsSection />
      <ConnectionsSection />
      <AuditSection />
    </>
  );
}

/** The signed-in user's own password: every token of theirs is revoked, so they sign in again. */
function AccountSection() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const { busy, error, run } = useAction();

  const submit = async (event: Event) => {
    event.preventDefault();
    const done = await run(async () => {
      await api.changePassword(current, next);
      return true;
    });
    // Every token was revoked: back to the login form.
    if (done) logout();
  };

  return (
    <section class="card" aria-labelledby="account-title">
      <h2 id="account-title">Your password</h2>
      <form class="form" onSubmit={(e) => void submit(e)}>
        <Alert message={error} />
        <label class="field">
          <span>Current password</span>
          <input type="password" autocomplete="current-password" value={current} onInput={(e) => setCurrent(e.currentTarget.value)} required />
        </label>
        <label class="field">
          <span>New password</span>
          <input type="password" autocomplete="new-password" value={next} onInput={(e) => setNext(e.currentTarget.value)} required />
        </label>
        <p class="muted small">Changing it signs you out everywhere, here included.</p>
        <button type="submit" class="button button-primary" disabled={busy || current === '' || next === ''}>
          {busy ? 'Changing…' : 'Change password'}
        </button>
      </form>
    </section>
  );
}

/** What each scope may do, in the words the selector and the list use. */
export const KEY_SCOPES: { scope: KeyScope; label: string; detail: string }[] = [
  { scope: 'integration', label: 'Integration', detail: 'the Sonarr/Radarr webhook and reading jobs' },
  { scope: 'read', label: 'Read', detail: 'every read and the live feed' },
  { scope: 'operate', label: 'Operate', detail: 'reads, job and queue actions, scans' },
  { scope: 'admin', label: 'Admin', detail: 'everything you may do, users and settings included' },
];

const scopeLabel = (scope: KeyScope) => KEY_SCOPES.find((s) => s.scope === scope)?.label ?? scope;

/** Named keys for scripts and the *arr applications: made here with a scope, shown once, revoked at once. */
function ApiKeysSection() {
  const keys = useResource(() => api.apiKeys(), []);
  const [name, setName] = useState('');
  const [scope, setScope] = useState<KeyScope>('integration');
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const { busy, error, run } = useAction();

  const submit = async (event: Event) => {
    event.preventDefault();
    setCreated(null);
    const result = await run(() => api.createApiKey(name.trim(), scope));
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
      {created && (
        <div class="alert alert-ok" role="status">
          <p>
            Key “{created.name}” made. Copy it now: it is not shown again.
          </p>
          <input readOnly class="mono" aria-label="New API key" value={created.key} onFocus={(e) => e.currentTarget.select()} />
        </div>
      )}
      {list.length > 0 && (
        <div class="table-wrap">
          <table class="table stack">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Scope</th>
                <th scope="col">Key</th>
                <th scope="col">Made by</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
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
            </tbody>
          </table>
        </div>
      )}
      <form class="form" onSubmit={(e) => void submit(e)}>
        <label class="field">
          <span>Key name</span>
          <input value={name} maxLength={100} onInput={(e) => setName(e.currentTarget.value)} required />
        </label>
        <label class="field">
          <span>Scope</span>
          <select value={scope} onChange={(e) => setScope(e.currentTarget.value as KeyScope)}>
            {KEY_SCOPES.map((s) => (
              <option key={s.scope} value={s.scope}>
                {s.label}: {s.detail}
              </option>
            ))}
          </select>
        </label>
        {scope === 'admin' && (
          <p class="alert alert-error" role="alert">
            An Admin key can create users, change passwords and settings: whoever finds it owns this service. Give it only to a script that
            administers, never to Sonarr, Radarr or a dashboard.
          </p>
        )}
        <button type="submit" class="button button-primary" disabled={busy || name.trim() === ''}>
          {busy ? 'Creating…' : 'Create key'}
        </button>
      </form>
    </section>
  );
}

/** Every event a target can want, in the order the form lists them. */
export const NOTIFICATION_EVENTS: { event: NotificationEvent; label: string }[] = [
  { event: 'job.completed', label: 'Job completed' },
  { event: 'job.failed', label: 'Job failed' },
  { event: 'queue.drained', label: 'Queue drained' },
  { event: 'node.offline', label: 'Node offline' },
  { event: 'node.online', label: 'Node back online' },
  { event: 'health.changed', label: 'Health warning, critical or back to healthy' },
  { event: 'disk.at_risk', label: 'Library disk above 90 %' },
];

/** What each kind wants as its URL and secret, for the form's hints. */
export const NOTIFICATION_KINDS: { kind: NotificationKind; label: string; url: string; secret: string }[] = [
  { kind: 'webhook', label: 'Webhook', url: 'https://example.org/hooks/condense', secret: 'Signing key (X-Condense-Signature), optional' },
  { kind: 'discord', label: 'Discord', url: 'https://discord.com/api/webhooks/ID/TOKEN', secret: 'Not used' },
  { kind: 'ntfy', label: 'ntfy', url: 'https://ntfy.sh/your-topic', secret: 'Access token, optional' },
  { kind: 'gotify', label: 'Gotify', url: 'https://gotify.example.org', secret: 'Application token (required)' },
  { kind: 'apprise', label: 'Apprise API', url: 'http://apprise:8000/notify/condense', secret: 'Not used' },
  { kind: 'email', label: 'E-mail (SMTP)', url: 'smtp://user@mail.example.org:587?tls=required&from=condense@example.org&to=you@example.org', secret: 'SMTP password, optional' },
];

/** Where condense tells what happened: each target with its events, last delivery or error, a test. */
function NotificationsSection() {
  const targets = useResource(() => api.notificationTargets(), []);
  const [name, setName] = useState('');
  const [kind, setKind] = useState<NotificationKind>('webhook');
  const [url, setUrl] = useState('');
  const [secret, setSecret] = useState('');
  const [events, setEvents] = useState<NotificationEvent[]>(['job.completed', 'job.failed']);
  const [tested, setTested] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const hints = NOTIFICATION_KINDS.find((k) => k.kind === kind);

  const toggle = (event: NotificationEvent, on: boolean) =>
    setEvents((current) => (on ? [...current.filter((e) => e !== event), event] : current.filter((e) => e !== event)));
  const submit = async (e: Event) => {
    e.preventDefault();
    const made = await run(() =>
      api.createNotificationTarget({ name: name.trim(), kind, url: url.trim(), events, secret: secret === '' ? null : secret }),
    );
    if (made) {
      setName('');
      setUrl('');
      setSecret('');
      await targets.reload();
    }
  };
  const test = async (target: NotificationTarget) => {
    setTested(null);
    const result = await run(() => api.testNotificationTarget(target.id));
    if (result) setTested(result.delivered ? `“${target.name}” took the test.` : `“${target.name}” did not take the test: ${result.error ?? ''}`);
    await targets.reload();
  };
  const remove = async (target: NotificationTarget) => {
    if (!confirm(`Remove “${target.name}”? What still waits for it is dropped.`)) return;
    await run(() => api.deleteNotificationTarget(target.id));
    await targets.reload();
  };

  const list = targets.data ?? [];
  return (
    <section class="card" aria-labelledby="notifications-title">
      <h2 id="notifications-title">Notifications</h2>
      <p class="muted small">
        Each message is kept until its target takes it, across restarts, and tried again with a growing wait (30 s up to an hour).
      </p>
      <Alert message={targets.error} />
      <Alert message={error} />
      {tested && (
        <div class="alert alert-ok" role="status">
          {tested}
        </div>
      )}
      {list.length > 0 && (
        <div class="table-wrap">
          <table class="table stack">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Events</th>
                <th scope="col">Last delivery</th>
                <th scope="col">Waiting</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.map((target) => (
                <tr key={target.id}>
                  <td data-label="Name">{target.name}</td>
                  <td data-label="Kind">{NOTIFICATION_KINDS.find((k) => k.kind === target.kind)?.label ?? target.kind}</td>
                  <td data-label="Events" class="small">
                    {target.events.join(', ')}
                  </td>
                  <td data-label="Last delivery">
                    {target.lastDeliveredAt ? formatDateTime(target.lastDeliveredAt) : 'Never'}
                    {target.lastError && (!target.lastDeliveredAt || (target.lastErrorAt ?? '') > target.lastDeliveredAt) && (
                      <span class="small text-bad break"> Failed: {target.lastError}</span>
                    )}
                  </td>
                  <td data-label="Waiting">{target.waiting}</td>
                  <td data-label="Actions" class="actions">
                    <button type="button" class="button" disabled={busy} onClick={() => void test(target)} aria-label={`Send a test to ${target.name}`}>
                      Test
                    </button>
                    <button type="button" class="button button-danger" disabled={busy} onClick={() => void remove(target)} aria-label={`Remove ${target.name}`}>
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form class="form" onSubmit={(e) => void submit(e)}>
        <label class="field">
          <span>Name</span>
          <input value={name} maxLength={100} onInput={(e) => setName(e.currentTarget.value)} required />
        </label>
        <label class="field">
          <span>Kind</span>
          <select value={kind} onChange={(e) => setKind(e.currentTarget.value as NotificationKind)}>
            {NOTIFICATION_KINDS.map((k) => (
              <option key={k.kind} value={k.kind}>
                {k.label}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>URL</span>
          <input value={url} placeholder={hints?.url} onInput={(e) => setUrl(e.currentTarget.value)} required />
        </label>
        <label class="field">
          <span>Secret</span>
          <input type="password" autocomplete="off" value={secret} placeholder={hints?.secret} onInput={(e) => setSecret(e.currentTarget.value)} />
        </label>
        <fieldset class="field">
          <legend>Events</legend>
          {NOTIFICATION_EVENTS.map(({ event, label }) => (
            <label key={event} class="check-field">
              <input type="checkbox" checked={events.includes(event)} onChange={(e) => toggle(event, e.currentTarget.checked)} />
              <span>{label}</span>
            </label>
          ))}
        </fieldset>
        <button type="submit" class="button button-primary" disabled={busy || name.trim() === '' || url.trim() === '' || events.length === 0}>
          {busy ? 'Adding…' : 'Add target'}
        </button>
      </form>
    </section>
  );
}

/** What each product wants as its URL and key, for the form's hints. */
export const CONNECTION_KINDS: { kind: ConnectionKind; label: string; url: string; key: string }[] = [
  { kind: 'plex', label: 'Plex', url: 'http://plex:32400', key: 'X-Plex-Token' },
  { kind: 'jellyfin', label: 'Jellyfin', url: 'http://jellyfin:8096', key: 'API key (Dashboard > API Keys)' },
  { kind: 'emby', label: 'Emby', url: 'http://emby:8096/emby', key: 'API key (Settings > API Keys)' },
  { kind: 'sonarr', label: 'Sonarr', url: 'http://sonarr:8989', key: 'API key (Settings > General)' },
  { kind: 'radarr', label: 'Radarr', url: 'http://radarr:7878', key: 'API key (Settings > General)' },
];

/** The media stack told of replaced files: each connection with its mappings, last refresh or error, a test. */
function ConnectionsSection() {
  const connections = useResource(() => api.connections(), []);
  const [name, setName] = useState('');
  const [kind, setKind] = useState<ConnectionKind>('plex');
  const [url, setUrl] = useState('');
  const [apiKey, setApiKey] = useState('');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const [tested, setTested] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const hints = CONNECTION_KINDS.find((k) => k.kind === kind);

  const submit = async (e: Event) => {
    e.preventDefault();
    const pathMappings = from.trim() !== '' && to.trim() !== '' ? [{ from: from.trim(), to: to.trim() }] : [];
    const made = await run(() => api.createConnection({ name: name.trim(), kind, url: url.trim(), apiKey, pathMappings }));
    if (made) {
      setName('');
      setUrl('');
      setApiKey('');
      setFrom('');
      setTo('');
      await connections.reload();
    }
  };
  const test = async (connection: Connection) => {
    setTested(null);
    const result = await run(() => api.testConnection(connection.id));
    if (result) setTested(result.delivered ? `“${connection.name}” answered.` : `“${connection.name}” did not answer: ${result.error ?? ''}`);
    await connections.reload();
  };
  const remove = async (connection: Connection) => {
    if (!confirm(`Remove “${connection.name}”? What still waits for it is dropped.`)) return;
    await run(() => api.deleteConnection(connection.id));
    await connections.reload();
  };

  const list = connections.data ?? [];
  return (
    <section class="card" aria-labelledby="connections-title">
      <h2 id="connections-title">Connections</h2>
      <p class="muted small">
        After a replace (or a change of container, by the new name) each connection is told, so it shows the new file: Plex scans the file's
        folder, Jellyfin and Emby are told the path, Sonarr and Radarr rescan the series or movie. Path mappings turn condense's folders into
        the product's.
      </p>
      <Alert message={connections.error} />
      <Alert message={error} />
      {tested && (
        <div class="alert alert-ok" role="status">
          {tested}
        </div>
      )}
      {list.length > 0 && (
        <div class="table-wrap">
          <table class="table stack">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Path mappings</th>
                <th scope="col">Last refresh</th>
                <th scope="col">Waiting</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.map((connection) => (
                <tr key={connection.id}>
                  <td data-label="Name">{connection.name}</td>
                  <td data-label="Kind">{CONNECTION_KINDS.find((k) => k.kind === connection.kind)?.label ?? connection.kind}</td>
                  <td data-label="Path mappings" class="small break">
                    {connection.pathMappings.length === 0 ? 'None' : connection.pathMappings.map((m) => `${m.from} → ${m.to}`).join(', ')}
                  </td>
                  <td data-label="Last refresh">
                    {connection.lastDeliveredAt ? formatDateTime(connection.lastDeliveredAt) : 'Never'}
                    {connection.lastError && (!connection.lastDeliveredAt || (connection.lastErrorAt ?? '') > connection.lastDeliveredAt) && (
                      <span class="small text-bad break"> Failed: {connection.lastError}</span>
                    )}
                  </td>
                  <td data-label="Waiting">{connection.waiting}</td>
                  <td data-label="Actions" class="actions">
                    <button type="button" class="button" disabled={busy} onClick={() => void test(connection)} aria-label={`Test ${connection.name}`}>
                      Test
                    </button>
                    <button type="button" class="button button-danger" disabled={busy} onClick={() => void remove(connection)} aria-label={`Remove ${connection.name}`}>
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form class="form" onSubmit={(e) => void submit(e)}>
        <label class="field">
          <span>Name</span>
          <input value={name} maxLength={100} onInput={(e) => setName(e.currentTarget.value)} required />
        </label>
        <label class="field">
          <span>Product</span>
          <select value={kind} onChange={(e) => setKind(e.currentTarget.value as ConnectionKind)}>
            {CONNECTION_KINDS.map((k) => (
              <option key={k.kind} value={k.kind}>
                {k.label}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>URL</span>
          <input value={url} placeholder={hints?.url} onInput={(e) => setUrl(e.currentTarget.value)} required />
        </label>
        <label class="field">
          <span>API key</span>
          <input type="password" autocomplete="off" value={apiKey} placeholder={hints?.key} onInput={(e) => setApiKey(e.currentTarget.value)} required />
        </label>
        <label class="field">
          <span>Folder as condense sees it</span>
          <input value={from} placeholder="/media/tv" onInput={(e) => setFrom(e.currentTarget.value)} />
        </label>
        <label class="field">
          <span>Same folder as the product sees it</span>
          <input value={to} placeholder="/tv" onInput={(e) => setTo(e.currentTarget.value)} />
        </label>
        <button type="submit" class="button button-primary" disabled={busy || name.trim() === '' || url.trim() === '' || apiKey === ''}>
          {busy ? 'Adding…' : 'Add connection'}
        </button>
      </form>
    </section>
  );
}

/** What an answer's status says happened, in words. */
export function auditOutcome(status: number): string {
  if (status >= 200 && status < 300) return 'Done';
  if (status === 403) return 'Refused: role';
  if (status >= 500) return `Failed (${status})`;
  return `Refused (${status})`;
}

/** The latest changes made through the API or this dashboard, who made them and when. */
function AuditSection() {
  const audit = useResource(() => api.audit(), []);
  const entries = audit.data?.items ?? [];
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
        {audit.data ? `; the latest ${entries.length} of ${audit.data.total}` : ''}.
      </p>
      <Alert message={audit.error} />
      {!audit.data ? (
        audit.loading && <Loading what="the audit log" />
      ) : entries.length === 0 ? (
        <p class="muted">Nothing has been changed yet.</p>
      ) : (
        <div class="table-wrap">
          <table class="table stack">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Who</th>
                <th scope="col">Action</th>
                <th scope="col">Result</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((entry) => (
                <tr key={entry.id}>
                  <td data-label="When">{formatDateTime(entry.at)}</td>
                  <td data-label="Who">
                    {entry.username} <span class="muted small">({entry.role})</span>
                  </td>
                  <td data-label="Action" class="mono small">
                    {entry.method} {entry.path}
                  </td>
                  <td data-label="Result" class={entry.status >= 400 ? 'text-bad' : undefined}>
                    {auditOutcome(entry.status)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

const limit = (value: number | null) => (value == null ? 'Unlimited' : String(value));

function LicenseSection() {
  const license = useResource(() => api.license(), []);
  const [key, setKey] = useState('');
  const { busy, error, run } = useAction();
  const [notice, setNotice] = useState<string | null>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    setNotice(null);
    const result = await run(() => api.setLicense(key.trim()));
    if (result) {
      license.setData(result);
      setKey('');
      setNotice(`Licence accepted: ${titleCase(result.tier)}.`);
    }
  };

  const data: License | null = license.data;
  const expired = data?.expiresAt ? Date.parse(data.expiresAt) < Date.now() : false;
  return (
    <section class="card" aria-labelledby="license-title">
      <h2 id="license-title">Licence</h2>
      <Alert message={license.error} />
      {data ? (
        <dl class="facts">
          <div>
            <dt>Tier</dt>
            <dd>
              <Badge value={data.tier} />
            </dd>
          </div>
          <div>
            <dt>Licensee</dt>
            <dd>{data.licensee ?? '—'}</dd>
          </div>
          <div>
            <dt>Expires</dt>
            <dd class={expired ? 'text-bad' : undefined}>
              {data.expiresAt ? formatDateTime(data.expiresAt) : 'Never'}
              {expired && ' (expired: FREE limits apply)'}
            </dd>
          </div>
          <div>
            <dt>Nodes</dt>
            <dd>{limit(data.maxNodes ?? null)}</dd>
          </div>
          <div>
            <dt>Concurrent jobs</dt>
            <dd>{limit(data.maxConcurrentJobs ?? null)}</dd>
          </div>
        </dl>
      ) : (
        license.loading && <Loading what="the licence" />
      )}
      <form class="form" onSubmit={(e) => void submit(e)}>
        <Alert message={error} />
        <Alert kind="ok" message={notice} />
        <label class="field">
          <span>Licence key</span>
          <textarea rows={3} value={key} spellcheck={false} autocomplete="off" onInput={(e) => setKey(e.currentTarget.value)} required />
        </label>
        <button type="submit" class="button button-primary" disabled={busy || key.trim() === ''}>
          {busy ? 'Checking…' : 'Set licence key'}
        </button>
      </form>
    </section>
  );
}

function GeneralSection({ settings }: { settings: Resource<SettingsData> }) {
  const [timeout, setTimeoutHours] = useState('');
  const [keepOriginals, setKeepOriginals] = useState(false);
  const { busy, error, run } = useAction();
  const [notice, setNotice] = useState<string | null>(null);

  useEffect(() => {
    if (settings.data) {
      setTimeoutHours(String(settings.data.jobTimeoutHours));
      setKeepOriginals(settings.data.keepOriginals);
    }
  }, [settings.data]);

  const hours = Number(timeout);
  const invalid = timeout.trim() === '' || !Number.isFinite(hours) || hours <= 0;

  const submit = async (event: Event) => {
    event.preventDefault();
    setNotice(null);
    if (invalid) return;
    const result = await run(() => api.saveSettings({ jobTimeoutHours: hours, keepOriginals }));
    if (result) {
      settings.setData(result);
      setNotice('Settings saved.');
    }
  };

  return (
    <section class="card" aria-labelledby="general-title">
      <h2 id="general-title">Encoding</h2>
      <Alert message={settings.error} />
      {!settings.data ? (
        settings.loading && <Loading what="settings" />
      ) : (
        <form class="form" onSubmit={(e) => void submit(e)} noValidate>
          <Alert message={error} />
          <Alert kind="ok" message={notice} />
          <label class="field">
            <span>Job timeout (hours)</span>
            <input
              type="number"
              inputMode="decimal"
              min={0.1}
              step="any"
              value={timeout}
              aria-invalid={invalid ? true : undefined}
              aria-describedby="timeout-help"
              onInput={(e) => setTimeoutHours(e.currentTarget.value)}
            />
            <small id="timeout-help" class={invalid ? 'text-bad' : 'muted'}>
              {invalid ? 'Enter a number of hours above 0.' : 'A job running longer than this fails and is retried.'}
            </small>
          </label>
          <label class="check-field">
            <input type="checkbox" checked={keepOriginals} onChange={(e) => setKeepOriginals(e.currentTarget.checked)} />
            <span>Keep originals (as a backup next to the new file)</span>
          </label>
          <button type="submit" class="button button-primary" disabled={busy || invalid}>
            {busy ? 'Saving…' : 'Save'}
          </button>
        </form>
      )}
    </section>
  );
}

/** Whether linked nodes can enroll. The token itself is never served: it is read where it was set. */
function EnrollmentSection({ settings }: { settings: Resource<SettingsData> }) {
  return (
    <section class="card" aria-labelledby="enrollment-title">
      <h2 id="enrollment-title">Linked nodes</h2>
      {settings.data && (
        <p class="small" role="status">
          {settings.data.enrollmentOpen
            ? 'New linked nodes can enroll: they present CLUSTER_TOKEN once and are given a credential of their own.'
            : 'No new linked node can enroll: CLUSTER_TOKEN is not set on this main node. Enrolled nodes still link with their credentials.'}
        </p>
      )}
      <p class="muted small">Revoke or remove a node on the Nodes page.</p>
    </section>
  );
}
