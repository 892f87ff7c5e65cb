// Settings > Encoding (job timeout, originals kept) and Linked nodes (whether enrollment is open).
import { useEffect, useState } from 'preact/hooks';
import { Alert, Loading } from '../../components';
import { useSave, type Resource } from '../../hooks';
import { api } from '../../session';
import type { Settings as SettingsData } from '../../types';

export function GeneralSection({ settings }: { settings: Resource<SettingsData> }) {
  const [timeout, setTimeoutHours] = useState('');
  const [keepOriginals, setKeepOriginals] = useState(false);
  const { busy, errors, save } = useSave([{ field: 'jobTimeoutHours' }]);
  const refused = errors.fields.jobTimeoutHours;
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
    const result = await save(() => api.saveSettings({ jobTimeoutHours: hours, keepOriginals }));
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
          <Alert message={errors.form} />
          <Alert kind="ok" message={notice} />
          <label class="field">
            <span>Job timeout (hours)</span>
            <input
              type="number"
              inputMode="decimal"
              min={0.1}
              step="any"
              value={timeout}
              aria-invalid={invalid || refused ? true : undefined}
              aria-describedby="timeout-help"
              onInput={(e) => setTimeoutHours(e.currentTarget.value)}
            />
            <small id="timeout-help" class={invalid || refused ? 'text-bad' : 'muted'} role={refused ? 'alert' : undefined}>
              {invalid ? 'Enter a number of hours above 0.' : (refused ?? 'A job running longer than this fails and is retried.')}
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
export function EnrollmentSection({ settings }: { settings: Resource<SettingsData> }) {
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
