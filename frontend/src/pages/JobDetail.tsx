import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { Alert, Badge, EtaText, JobActionButtons, Loading, PriorityControl, ProgressBar, SegmentStrip, TransferLine } from '../components';
import { DASH, formatBytes, formatDateTime, formatEventDetail, formatFps, formatPercent, titleCase } from '../format';
import { useLiveMessages, useResource } from '../hooks';
import { isTerminal, mergeLive } from '../jobs';
import { JobPlan } from './JobPlan';
import { routeHref } from '../router';
import { cpuOf, formatMs, phaseLabel, timesOf } from '../phases';
import { withLiveSegments } from '../segments';
import { Table } from '../widgets/Table';
import { api } from '../session';
import type { Job, JobDetail as JobDetailData, JobEvent } from '../types';

export function JobDetail({ id }: { id: number }) {
  const job = useResource(() => api.job(id), [id]);
  const [error, setError] = useState<string | null>(null);
  const reloadTimer = useRef<ReturnType<typeof setTimeout> | null>(null);

  useLiveMessages((message) => {
    if (message.jobId !== id) return;
    // A message that carries the job's segments (one changed hands) replaces them.
    job.setData((current) => (current ? withLiveSegments(mergeLive(current, message), message) : current));
    // A status change adds an event to the history: fetch it (coalesced).
    if (message.type === 'status' && reloadTimer.current === null) {
      reloadTimer.current = setTimeout(() => {
        reloadTimer.current = null;
        void job.reload();
      }, 1_000);
    }
  });
  useEffect(() => () => {
    if (reloadTimer.current) clearTimeout(reloadTimer.current);
  }, []);

  const changed = (updated: Job) => {
    job.setData((current) => (current ? { ...current, ...updated } : current));
    void job.reload();
  };

  const data = job.data;
  // Empty for a video encoded as one span (and from a server that predates segments).
  const segments = data?.segments ?? [];
  return (
    <div class="page">
      <nav class="breadcrumb" aria-label="Breadcrumb">
        <a href={routeHref('/jobs')}>Jobs</a> / <span aria-current="page">Job {id}</span>
      </nav>
      <Alert message={job.error} />
      <Alert message={error} onClose={() => setError(null)} />
      {!data ? (
        job.loading && <Loading what="the job" />
      ) : (
        <>
          <header class="page-head">
            <h1 class="file-name">{data.fileName}</h1>
            <JobActionButtons job={data} onChanged={changed} onError={setError} />
          </header>
          <section class="card" aria-label="Job facts">
            <div class="card-head">
              <Badge value={data.status} />
              {data.stage && !isTerminal(data.status) && <span class="muted">Stage: {titleCase(data.stage)}</span>}
            </div>
            {data.status !== 'PENDING' && data.status !== 'SKIPPED' && <ProgressBar job={data} />}
            <TransferLine job={data} />
            {data.failureReason && (
              <p class="text-bad">
                {data.failureReason}
                {data.failureCode && <code class="small"> ({data.failureCode})</code>}
              </p>
            )}
            {data.status === 'SKIPPED' && data.skipReason && <p class="muted">Skipped: {data.skipReason}</p>}
            <JobFacts job={data} />
            <PriorityControl job={data} onChanged={changed} onError={setError} />
          </section>
          <JobPlan id={id} status={data.status} />
          {segments.length > 0 && (
            <section class="card" aria-labelledby="segments-title">
              <h2 id="segments-title">Segments</h2>
              <SegmentStrip segments={segments} />
            </section>
          )}
          <JobTimesCard events={data.events} />
          <section class="card" aria-labelledby="events-title">
            <h2 id="events-title">History</h2>
            {data.events.length === 0 ? (
              <p class="muted">No events recorded.</p>
            ) : (
              <Table caption="The job's events, oldest first" columns={['When', 'Event', 'Status', 'Node', 'Detail']}>
                {data.events.map((event) => (
                  <tr key={event.id}>
                    <td data-label="When">{formatDateTime(event.at)}</td>
                    <td data-label="Event">{titleCase(event.kind.replace(/_/g, ' '))}</td>
                    <td data-label="Status">
                      {event.fromStatus || event.toStatus
                        ? `${event.fromStatus ? titleCase(event.fromStatus) : DASH} → ${event.toStatus ? titleCase(event.toStatus) : DASH}`
                        : DASH}
                    </td>
                    <td data-label="Node">{event.nodeName ?? DASH}</td>
                    <td data-label="Detail" class="cell-detail">
                      {formatEventDetail(event.detail)}
                    </td>
                  </tr>
                ))}
              </Table>
            )}
          </section>
        </>
      )}
    </div>
  );
}

function JobFacts({ job }: { job: JobDetailData }) {
  const savedPercent =
    job.savedBytes != null && job.sourceSize ? formatPercent((job.savedBytes / job.sourceSize) * 100, 1) : null;
  const facts: [string, ComponentChildren][] = [
    ['Path', <code class="break">{job.filePath || DASH}</code>],
    ['Node', job.node ?? DASH],
    ['Speed', formatFps(job.fps)],
    ['ETA', <EtaText job={job} />],
    ['Codec', `${job.sourceCodec ?? '?'} → ${job.targetCodec ?? '?'}`],
    ['Source size', formatBytes(job.sourceSize)],
    ['Output size', formatBytes(job.outputSize)],
    ['Saved', savedPercent ? `${formatBytes(job.savedBytes)} (${savedPercent})` : formatBytes(job.savedBytes)],
    // Two-pass encoding: which pass runs (the first writes statistics, the second the output).
    ...(job.encodePass != null
      ? [['Pass', job.encodePass === 1 ? '1 of 2 (statistics)' : '2 of 2 (encode)'] as [string, ComponentChildren]]
      : []),
    // VMAF mode: what the search chose and predicted, and what the output measured.
    ...(job.chosenQuality != null ? [['Chosen CRF', String(job.chosenQuality)] as [string, ComponentChildren]] : []),
    ...(job.predictedSize != null ? [['Predicted size', formatBytes(job.predictedSize)] as [string, ComponentChildren]] : []),
    ...(job.vmaf != null
      ? [['VMAF', `${job.vmaf.toFixed(2)} (5th percentile ${(job.vmafP5 ?? job.vmaf).toFixed(2)})`] as [string, ComponentChildren]]
      : []),
    ['Retries', String(job.retryCount)],
    ['Created', formatDateTime(job.createdAt)],
    ['Started', formatDateTime(job.startedAt)],
    ['Completed', formatDateTime(job.completedAt)],
    ['Updated', formatDateTime(job.updatedAt)],
  ];
  return (
    <dl class="facts">
      {facts.map(([label, value]) => (
        <div key={label}>
          <dt>{label}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}

/** Where a completed job's time went, phase by phase, by the service's own clocks. */
function JobTimesCard({ events }: { events: JobEvent[] }) {
  const times = timesOf(events);
  if (!times) return null;
  const { phases, aloneMs } = times;
  const wall = phases.reduce((sum, p) => sum + p.wallMs, 0);
  const cpu = phases.reduce((sum, p) => sum + p.cpuMs, 0);
  // A job a linked node took by transfer: its phases name it; the rest ran on the main node.
  const nodes = phases.some((p) => p.node);
  return (
    <section class="card" aria-labelledby="times-title">
      <h2 id="times-title">Where the time went</h2>
      <Table
        caption="Each phase of the job, in the order it ran"
        columns={['Phase', ...(nodes ? ['Node'] : []), 'Wall time', 'CPU time', 'Share']}
        footer={
          <tr>
            <th scope="row">Total</th>
            {nodes && <td />}
            <td data-label="Wall time">{formatMs(wall)}</td>
            <td data-label="CPU time">{formatMs(cpu)}</td>
            <td />
          </tr>
        }
      >
        {phases.map((p, i) => (
          <tr key={`${i}-${p.phase}`}>
            <td data-label="Phase">{phaseLabel(p.phase)}</td>
            {nodes && <td data-label="Node">{p.node ?? 'main node'}</td>}
            <td data-label="Wall time">{formatMs(p.wallMs)}</td>
            <td data-label="CPU time">{cpuOf(p)}</td>
            <td data-label="Share">{wall > 0 ? formatPercent((p.wallMs / wall) * 100) : DASH}</td>
          </tr>
        ))}
      </Table>
      {aloneMs != null && aloneMs > 0 && (
        <p class="muted small">The video's last {formatMs(aloneMs)} ran in one session: the others had no span left.</p>
      )}
    </section>
  );
}
