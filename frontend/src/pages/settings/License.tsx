// Settings > Licence: the tier in force, its limits and expiry, and setting a key.
import { useState } from 'preact/hooks';
import { Alert, Badge, Loading } from '../../components';
import { formatDateTime, titleCase } from '../../format';
import { useAction, useResource } from '../../hooks';
import { api } from '../../session';
import type { License } from '../../types';

const limit = (value: number | null) => (value == null ? 'Unlimited' : String(value));

export function LicenseSection() {
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
