import { useEffect, useRef, useState } from 'preact/hooks';
import { errorMessage } from '../api';
import { sparklinePath } from '../charts';
import { Alert, Badge, EtaText, JobActionButtons, Loading, ProgressBar, Stat, TransferLine } from '../components';
import { formatBytes, formatDateTime, formatFps, formatHours, formatNumber, formatPercent, formatRelative, titleCase } from '../format';
import { useLiveMessages, useResource, useRole } from '../hooks';
import { RUNNING_STATUSES, applyLiveMessage } from '../jobs';
import { routeHref } from '../router';
import { allows, api } from '../session';
import type { Dashboard, Job, NodeCheck, QueueStats, RecheckReport } from '../types';

const QUEUE_ROWS: [keyof QueueStats, string][] = [
  ['pending', 'Pending'],
  ['queued', 'Queued'],
  ['analyzing', 'Analyzing'],
  ['encoding', 'Encoding'],
  ['paused', 'Paused'],
  ['completed', 'Completed'],
  ['failed', 'Failed'],
  ['skipped', 'Skipped'],
  ['cancelled', 'Cancelled'],
];

/** What the product is for, in bytes: saved so far, and what the libraries' forecasts
 * predict for the files not encoded yet (each library's latest forecast; none: not counted). */
async function savingsSummary(): Promise<{ saved: number; forecastSaved: number; forecastFiles: number; forecasts: number }> {
  const [stats, libraries] = await Promise.all([api.insightStats(), api.libraries()]);
  const forecasts = await Promise.all(libraries.map((library) => api.forecast(library.id).catch(() => null)));
  const done = forecasts.filter((f) => f != null);
  return {
    saved: stats.storage.totalSavedBytes,
    forecastSaved: done.reduce((sum, f) => sum + f.totals.savedBytes, 0),
    forecastFiles: done.reduce((sum, f) => sum + f.totals.encoded, 0),
    forecasts: done.length,
  };
}

export function Overview() {
  const dashboard = useResource(() => api.dashboard(), [], { pollMs: 15_000 });
  const savings = useResource(savingsSummary, [], { pollMs: 60_000 });
  const [actionError, setActionError] = useState<string | null>(null);
  const statsTimer = useRef<ReturnType<typeof setTimeout> | null>(null);

  const update = (change: (current: Dashboard) => Dashboard) =>
    dashboard.setData((current) => (current ? change(current) : current));

  useLiveMessages((message) => {
    update((current) => {
      const activeJobs = applyLiveMessage(current.activeJobs, message, { insert: true, statuses: RUNNING_STATUSES });
      return activeJobs === current.activeJobs ? current : { ...current, activeJobs };
    });
    // A status change moves the queue counters: fetch them again, at most once every 2 s.
    if (message.type === 'status' && statsTimer.current === null) {
      statsTimer.current = setTimeout(() => {
        statsTimer.current = null;
        api.queueStats().then((queue) => update((current) => ({ ...current, queue })), () => {});
      }, 2_000);
    }
  });
  useEffect(() => () => {
    if (statsTimer.current) clearTimeout(statsTimer.current);
  }, []);

  const replaceJob = (job: Job) =>
    update((current) => ({
      ...current,
      activeJobs: RUNNING_STATUSES.includes(job.status)
        ? current.activeJobs.map((j) => (j.id === job.id ? job : j))
        : current.activeJobs.filter((j) => j.id !== job.id),
    }));

  const data = dashboard.data;
  return (
    <div class="page">
      <header class="page-head">
        <h1>Overview</h1>
      </header>
      <Alert message={dashboard.error} />
      <Alert message={actionError} onClose={() => setActionError(null)} />
      {!data ? (
        dashboard.loading && <Loading what="the dashboard" />
      ) : (
        <>
          <section class="card" aria-labelledby="savings-title">
            <h2 id="savings-title">Space saved</h2>
            <div class="stats">
              <Stat label="Saved so far" value={savings.data ? formatBytes(savings.data.saved) : '—'} hint="by every completed job" />
              <Stat
                label="Encoding now"
                value={formatBytes(data.activeJobs.reduce((sum, job) => sum + job.sourceSize, 0))}
                hint={`${data.activeJobs.length} file${data.activeJobs.length === 1 ? '' : 's'} being made smaller`}
              />
              <Stat
                label="Forecast for what waits"
                value={savings.data && savings.data.forecasts > 0 ? formatBytes(savings.data.forecastSaved) : '—'}
                hint={
                  savings.data && savings.data.forecasts > 0 ? (
                    `over ${savings.data.forecastFiles} files, from ${savings.data.forecasts} librar${savings.data.forecasts === 1 ? 'y' : 'ies'}`
                  ) : (
                    <a href={routeHref('/libraries')}>forecast a library</a>
                  )
                }
              />
            </div>
          </section>
          <div class="grid grid-3">
            <section class="card" aria-labelledby="health-title">
              <div class="card-head">
                <h2 id="health-title">System health</h2>
                <Badge value={data.health.overall} title="Overall health" />
              </div>
              <ul class="checks">
                {data.health.checks.map((check) => (
                  <li key={check.name} class="check">
                    <span class={`check-dot check-${check.level.toLowerCase()}`} aria-hidden="true" />
                    <span class="check-name">{titleCase(check.name)}</span>
                    <Badge value={check.level} />
                    <span class="check-message">{check.message}</span>
                  </li>
                ))}
              </ul>
              <NodeChecks onError={setActionError} />
            </section>

            <section class="card" aria-labelledby="queue-title">
              <div class="card-head">
                <h2 id="queue-title">Queue</h2>
                <a href={routeHref('/jobs')}>All jobs</a>
              </div>
              <dl class="counts">
                {QUEUE_ROWS.map(([key, label]) => (
                  <div key={key}>
                    <dt>{label}</dt>
                    <dd>{formatNumber(data.queue[key] as number)}</dd>
                  </div>
                ))}
              </dl>
            </section>

            <section class="card" aria-labelledby="perf-title">
              <h2 id="perf-title">Performance</h2>
              <div class="stats">
                <Stat label="Throughput" value={`${formatNumber(data.queue.throughputPerHour, 1)} / h`} hint="jobs completed, last 24 h" />
                <Stat
                  label="Queue done in"
                  value={data.queue.estimatedCompletionHours == null ? '—' : formatHours(data.queue.estimatedCompletionHours)}
                  hint={data.queue.estimatedCompletionHours == null ? 'no throughput yet' : 'estimated'}
                />
                <Stat label="Active workers" value={formatNumber(data.queue.activeWorkers)} />
                <Stat
                  label="CPU load"
                  value={`${formatNumber(data.system.cpu.load1, 2)} / ${data.system.cpu.cores} cores`}
                  hint={`ratio ${formatNumber(data.system.cpu.loadRatio, 2)}`}
                />
                <Stat
                  label="Memory"
                  value={formatPercent(data.system.memory.percent)}
                  hint={
                    <>
                      {formatBytes(data.system.memory.used)} of {formatBytes(data.system.memory.total)}
                      <MemoryTrend values={data.system.memory.trend.map((point) => point.percent)} />
                    </>
                  }
                />
              </div>
            </section>
          </div>

          <section class="card" aria-labelledby="active-title">
            <div class="card-head">
              <h2 id="active-title">Active jobs ({data.activeJobs.length})</h2>
              <span class="muted">
                {data.nodes.filter((node) => node.status !== 'OFFLINE').length} of {data.nodes.length} nodes up
              </span>
            </div>
            {data.activeJobs.length === 0 ? (
              <p class="muted">Nothing is encoding right now.</p>
            ) : (
              <ul class="job-cards">
                {data.activeJobs.map((job) => (
                  <li key={job.id} class="job-card">
                    <div class="job-card-head">
                      <a href={routeHref(`/jobs/${job.id}`)} class="file-name">
                        {job.fileName}
                      </a>
                      <Badge value={job.stage ?? job.status} />
                    </div>
                    <ProgressBar job={job} />
                    <TransferLine job={job} />
                    <dl class="inline-facts">
                      <div>
                        <dt>Node</dt>
                        <dd>{job.node ?? '—'}</dd>
                      </div>
                      <div>
                        <dt>Speed</dt>
                        <dd>{formatFps(job.fps)}</dd>
                      </div>
                      <div>
                        <dt>ETA</dt>
                        <dd>
                          <EtaText job={job} />
                        </dd>
                      </div>
                    </dl>
                    <JobActionButtons job={job} compact onChanged={replaceJob} onError={setActionError} />
                  </li>
                ))}
              </ul>
            )}
          </section>

          {data.system.disks.length > 0 && (
            <section class="card" aria-labelledby="disks-title">
              <h2 id="disks-title">Storage</h2>
              <ul class="disks">
                {data.system.disks.map((disk) => (
                  <li key={disk.path}>
                    <div class="disk-head">
                      <code>{disk.path}</code>
                      <span>
                        {formatBytes(disk.free)} free of {formatBytes(disk.total)}
                      </span>
                    </div>
                    <meter
                      class={disk.usedPercent > 90 ? 'meter-danger' : undefined}
                      min={0}
                      max={100}
                      high={90}
                      optimum={0}
                      value={disk.usedPercent}
                      aria-label={`Disk usage of ${disk.path}: ${formatPercent(disk.usedPercent)}`}
                    />
                    {disk.usedPercent > 90 && <p class="text-bad">Above 90 % used: encodes may fail for lack of space.</p>}
                  </li>
                ))}
              </ul>
            </section>
          )}
        </>
      )}
    </div>
  );
}

const NODE_CHECK_NAMES: Record<NodeCheck['kind'], string> = { libraryPath: 'Library path', disk: 'Disk', encoder: 'Encoder' };

/** The main node's own checks (each library path readable, the disk under it, the
 * libraries' encoders opening on a node that is up): the ones failing, when they last ran
 * and run again on their own, and, for an operator or admin, a button that runs them at
 * once. */
function NodeChecks({ onError }: { onError: (message: string) => void }) {
  const role = useRole();
  const last = useResource(() => api.lastRecheck(), [], { pollMs: 60_000 });
  const [busy, setBusy] = useState(false);
  const report: RecheckReport | null = last.data;
  const failing = report ? report.checks.filter((check) => check.level !== 'HEALTHY') : [];
  const recheck = async () => {
    setBusy(true);
    try {
      last.setData(await api.recheckHealth());
    } catch (err) {
      onError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="node-checks" aria-label="Library paths and disks">
      {!report ? (
        <p class="muted">{last.error ?? 'Checking the library paths, their disks and the encoders…'}</p>
      ) : failing.length === 0 ? (
        <p class="muted">
          {report.checks.length === 0 ? 'No library paths to check.' : 'Every library path readable, no disk at risk, every encoder opens.'}
        </p>
      ) : (
        <ul class="checks">
          {failing.map((check) => (
            <li key={`${check.kind}:${check.subject}`} class="check">
              <span class={`check-dot check-${check.level.toLowerCase()}`} aria-hidden="true" />
              <span class="check-name">{NODE_CHECK_NAMES[check.kind]}</span>
              <Badge value={check.level} />
              <span class="check-message">{check.message}</span>
            </li>
          ))}
        </ul>
      )}
      <div class="card-head">
        <span class="muted">
          {report ? (
            <>
              Checked <span title={formatDateTime(report.checkedAt)}>{formatRelative(report.checkedAt)}</span>; again at{' '}
              {formatDateTime(report.nextAt)}
            </>
          ) : null}
        </span>
        {allows(role, 'operator') && (
          <button type="button" class="button" disabled={busy} onClick={() => void recheck()}>
            {busy ? 'Checking…' : 'Re-check now'}
          </button>
        )}
      </div>
    </div>
  );
}

function MemoryTrend({ values }: { values: number[] }) {
  if (values.length < 2) return null;
  return (
    <svg class="sparkline" viewBox="0 0 100 24" preserveAspectRatio="none" role="img" aria-label="Memory use trend">
      <path d={sparklinePath(values, 100, 24)} />
    </svg>
  );
}
