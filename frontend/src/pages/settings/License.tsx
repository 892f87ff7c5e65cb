// Settings > Licence: the tier in force, its limits and expiry, setting a key, and the
// installation's one 14-day trial of SUPPORTER or PRO (offered while unused, with its days left
// while it runs).
import { useState } from 'preact/hooks';
import { Alert, Badge, Loading } from '../../components';
import { formatDateTime, titleCase } from '../../format';
import { useAction, useResource } from '../../hooks';
import { api } from '../../session';
import { trialTierValues, type components } from '../../generated/api';
import type { License } from '../../types';

const limit = (value: number | null) => (value == null ? 'Unlimited' : String(value));

type TrialTier = components['schemas']['TrialTier'];

const days = (n: number) => (n === 1 ? '1 day' : `${n} days`);

export function LicenseSection() {
  const license = useResource(() => api.license(), []);
  const [key, setKey] = useState('');
  const { busy, error, run } = useAction();
  const trialAction = useAction();
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

  const startTrial = async (tier: TrialTier) => {
    if (!confirm(`Start the 14-day ${titleCase(tier)} trial? Each installation has one trial, and it cannot be started again.`)) return;
    setNotice(null);
    const result = await trialAction.run(() => api.request<License>('POST', '/api/license/trial', { tier }));
    if (result) {
      license.setData(result);
      setNotice(`${titleCase(tier)} trial started: ${days(result.trial.daysLeft)} left.`);
    }
  };

  const data: License | null = license.data;
  const expired = data?.expiresAt ? Date.parse(data.expiresAt) < Date.now() : false;
  const trial = data?.trial;
  // A paid key in force outranks a trial, so the server refuses one then.
  const offerTrial = trial != null && !trial.used && data?.effectiveTier === 'FREE';
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
              {data.effectiveTier && data.effectiveTier !== data.tier && (
                <>
                  {' '}
                  in force: <Badge value={data.effectiveTier} />
                </>
              )}
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
          {trial?.used && (
            <div>
              <dt>Trial</dt>
              <dd>
                {titleCase(trial.tier)}
                {trial.running
                  ? `: ${days(trial.daysLeft)} left, until ${formatDateTime(trial.endsAt)}`
                  : `: ended ${formatDateTime(trial.endsAt)}`}
              </dd>
            </div>
          )}
        </dl>
      ) : (
        license.loading && <Loading what="the licence" />
      )}
      {offerTrial && (
        <div class="form" aria-label="Trial">
          <Alert message={trialAction.error} />
          <p class="muted">Try a paid tier for 14 days, once per installation. Running jobs finish when it ends; FREE limits then apply to what starts next.</p>
          <div class="actions">
            {trialTierValues.map((tier) => (
              <button type="button" class="button" key={tier} disabled={trialAction.busy} onClick={() => void startTrial(tier)}>
                Try {titleCase(tier)} for 14 days
              </button>
            ))}
          </div>
        </div>
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
