import { useEffect, useState } from 'preact/hooks';
import { Alert, Badge, Loading } from '../components';
import { formatDateTime, titleCase } from '../format';
import { useAction, useResource, type Resource } from '../hooks';
import { api } from '../session';
import type { License, Settings as SettingsData } from '../types';

export function Settings() {
  const settings = useResource(() => api.settings(), []);
  return (
    <div class="page">
      <header class="page-head">
        <h1>Settings</h1>
      </header>
      <div class="grid grid-2">
        <LicenseSection />
        <div class="stack-gap">
          <GeneralSection settings={settings} />
          <ClusterTokenSection settings={settings} />
        </div>
      </div>
    </div>
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

async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // Plain http on a LAN address has no clipboard API: fall back to a hidden text area.
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.appendChild(area);
  area.select();
  const ok = document.execCommand('copy');
  area.remove();
  if (!ok) throw new Error('Copy failed; select the token and copy it by hand.');
}

function ClusterTokenSection({ settings }: { settings: Resource<SettingsData> }) {
  const [visible, setVisible] = useState(false);
  const [copied, setCopied] = useState<string | null>(null);
  const token = settings.data?.clusterToken ?? '';

  const copy = async () => {
    try {
      await copyText(token);
      setCopied('Copied to the clipboard.');
    } catch (err) {
      setCopied(err instanceof Error ? err.message : 'Copy failed.');
    }
  };

  return (
    <section class="card" aria-labelledby="cluster-title">
      <h2 id="cluster-title">Cluster token</h2>
      <p class="muted small">Linked nodes present this token (CLUSTER_TOKEN) to register with this main node.</p>
      {settings.data && (
        <>
          <div class="path-row">
            <input
              readOnly
              type={visible ? 'text' : 'password'}
              value={token}
              aria-label="Cluster token"
              class="mono"
              onFocus={(e) => e.currentTarget.select()}
            />
            <button type="button" class="button" aria-pressed={visible} onClick={() => setVisible(!visible)}>
              {visible ? 'Hide' : 'Show'}
            </button>
            <button type="button" class="button" onClick={() => void copy()} disabled={!token}>
              Copy
            </button>
          </div>
          <p class="small muted" role="status">
            {copied ?? ''}
          </p>
        </>
      )}
    </section>
  );
}
