// Shared pieces of the pages: progress bar, badges, alerts, job action buttons, pagination.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { errorMessage } from './api';
import { formatEta, formatFps, titleCase } from './format';
import { useConnectionState, useRole } from './hooks';
import { ACTION_LABELS, isTerminal, progressColour, transferText } from './jobs';
import { nodeShares, segmentCells, segmentSummary, shareText, type Segment } from './segments';
import { allows, api } from './session';
import type { HealthLevel, Job, JobAction, JobStatus, NodeStatus } from './types';

const COLOUR_WORDS = { green: 'fast', yellow: 'slow (CPU speed)', red: 'stalled', neutral: '' } as const;

export function ProgressBar({ job }: { job: Pick<Job, 'fileName' | 'progress' | 'fps' | 'stalled' | 'stage'> }) {
  const colour = progressColour(job);
  const value = Math.max(0, Math.min(100, Math.round((job.progress ?? 0) * 10) / 10));
  const parts = [`${value}%`];
  if (job.fps != null) parts.push(formatFps(job.fps));
  if (COLOUR_WORDS[colour]) parts.push(COLOUR_WORDS[colour]);
  return (
    <div class="progress-wrap">
      <div
        class={`progress progress-${colour}`}
        role="progressbar"
        aria-label={`Progress of ${job.fileName}`}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={value}
        aria-valuetext={parts.join(', ')}
      >
        <div class="progress-fill" style={{ width: `${value}%` }} />
      </div>
      <span class="progress-text">
        {value.toFixed(value < 100 ? 1 : 0)}%{job.stalled ? ' · stalled' : ''}
      </span>
    </div>
  );
}

/** What a job's node moves for it, which way and how fast (in stage TRANSFERRING, or a
 * download beside the encode of a copy read as it arrives); nothing for any other job. */
export function TransferLine({ job }: { job: Pick<Job, 'transfer'> }) {
  if (!job.transfer) return null;
  return <span class="transfer-text">{transferText(job.transfer)}</span>;
}

const STATUS_TONES: Record<string, string> = {
  PENDING: 'muted',
  QUEUED: 'info',
  ANALYZING: 'active',
  ENCODING: 'active',
  PAUSED: 'warn',
  COMPLETED: 'ok',
  SKIPPED: 'muted',
  FAILED: 'bad',
  CANCELLED: 'muted',
  ONLINE: 'ok',
  DEGRADED: 'warn',
  OFFLINE: 'bad',
  HEALTHY: 'ok',
  WARNING: 'warn',
  CRITICAL: 'bad',
  // Health checks of a library (and forecasts): runs, and what a check found in a file.
  RUNNING: 'active',
  DONE: 'ok',
  INTERRUPTED: 'warn',
  ok: 'ok',
  damaged: 'bad',
  unreadable: 'bad',
};

export function Badge({ value, title }: { value: JobStatus | NodeStatus | HealthLevel | string; title?: string }) {
  return (
    <span class={`badge badge-${STATUS_TONES[value] ?? 'muted'}`} title={title}>
      {titleCase(value)}
    </span>
  );
}

export function Alert({ message, kind = 'error', onClose }: { message: string | null; kind?: 'error' | 'info' | 'ok'; onClose?: () => void }) {
  if (!message) return null;
  return (
    <div class={`alert alert-${kind}`} role={kind === 'error' ? 'alert' : 'status'}>
      <span>{message}</span>
      {onClose && (
        <button type="button" class="icon-button" aria-label="Dismiss message" onClick={onClose}>
          ×
        </button>
      )}
    </div>
  );
}

/** A server's message about one field, shown beneath it; the field points at it with aria-describedby. */
export function FieldError({ id, message }: { id: string; message: string | undefined | null }) {
  if (!message) return null;
  return (
    <small id={id} class="field-error text-bad" role="alert">
      {message}
    </small>
  );
}

/** The attributes that tie a field to its error message, when it has one. */
export function invalidProps(id: string, message: string | undefined | null): { 'aria-invalid'?: true; 'aria-describedby'?: string } {
  return message ? { 'aria-invalid': true, 'aria-describedby': id } : {};
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status">
      Loading {what}…
    </p>
  );
}

export function Stat({ label, value, hint }: { label: string; value: ComponentChildren; hint?: ComponentChildren }) {
  return (
    <div class="stat">
      <div class="stat-label">{label}</div>
      <div class="stat-value">{value}</div>
      {hint != null && <div class="stat-hint">{hint}</div>}
    </div>
  );
}

const CONNECTION_TEXT = {
  connecting: 'Connecting',
  connected: 'Live',
  reconnecting: 'Reconnecting',
  offline: 'Offline',
} as const;

export function ConnectionIndicator() {
  const state = useConnectionState();
  const label = `Live updates: ${state}`;
  return (
    <span class={`connection connection-${state}`} role="status" aria-live="polite" aria-label={label} title={label}>
      <span class="connection-dot" aria-hidden="true" />
      <span class="connection-text">{CONNECTION_TEXT[state]}</span>
    </span>
  );
}

/** The actions the server allows on this job now; reports the updated job or an error. */
export function JobActionButtons({
  job,
  onChanged,
  onError,
  compact = false,
}: {
  job: Pick<Job, 'id' | 'fileName' | 'actions'>;
  onChanged: (job: Job) => void;
  onError: (message: string) => void;
  compact?: boolean;
}) {
  const [busy, setBusy] = useState<JobAction | null>(null);
  const role = useRole();
  const act = async (action: JobAction) => {
    if (action === 'cancel' && !confirm(`Cancel the job for ${job.fileName}?`)) return;
    if (action === 'force' && !confirm(`Re-encode ${job.fileName} again?`)) return;
    setBusy(action);
    try {
      onChanged(await api.jobAction(job.id, action));
    } catch (err) {
      onError(errorMessage(err));
    } finally {
      setBusy(null);
    }
  };
  // Job actions are an operator's: a viewer is shown none.
  if (!allows(role, 'operator')) return null;
  return (
    <div class={`actions${compact ? ' actions-compact' : ''}`}>
      {job.actions.map((action) => (
        <button
          key={action}
          type="button"
          class={`button button-small${action === 'cancel' ? ' button-danger' : ''}`}
          disabled={busy !== null}
          aria-label={`${ACTION_LABELS[action]} ${job.fileName}`}
          onClick={() => void act(action)}
        >
          {busy === action ? '…' : ACTION_LABELS[action]}
        </button>
      ))}
    </div>
  );
}

/** The range the server accepts for a job's priority. */
export const PRIORITY_RANGE = { min: -10, max: 10 } as const;

/**
 * A job's priority (QUEUED jobs run highest first, then oldest), raised or lowered by an
 * operator while the job has yet to finish; a viewer, or a finished job, shows the number only.
 */
export function PriorityControl({
  job,
  onChanged,
  onError,
  compact = false,
}: {
  job: Pick<Job, 'id' | 'fileName' | 'priority' | 'status'>;
  onChanged: (job: Job) => void;
  onError: (message: string) => void;
  compact?: boolean;
}) {
  const role = useRole();
  const [busy, setBusy] = useState(false);
  const label = compact ? String(job.priority) : `Priority ${job.priority}`;
  if (!allows(role, 'operator') || isTerminal(job.status)) return <span class={compact ? undefined : 'muted'}>{label}</span>;
  const set = async (priority: number) => {
    setBusy(true);
    try {
      onChanged(await api.setPriority(job.id, priority));
    } catch (err) {
      onError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class={`actions priority${compact ? ' actions-compact' : ''}`} role="group" aria-label={`Priority of ${job.fileName}`}>
      <span class={compact ? 'priority-value' : 'muted'}>{label}</span>
      <button
        type="button"
        class="button button-small"
        disabled={busy || job.priority >= PRIORITY_RANGE.max}
        aria-label={`Raise the priority of ${job.fileName}`}
        onClick={() => void set(job.priority + 1)}
      >
        {compact ? '▲' : 'Raise'}
      </button>
      <button
        type="button"
        class="button button-small"
        disabled={busy || job.priority <= PRIORITY_RANGE.min}
        aria-label={`Lower the priority of ${job.fileName}`}
        onClick={() => void set(job.priority - 1)}
      >
        {compact ? '▼' : 'Lower'}
      </button>
    </div>
  );
}

export function Pagination({
  page,
  pageSize,
  total,
  onPage,
}: {
  page: number;
  pageSize: number;
  total: number;
  onPage: (page: number) => void;
}) {
  const pages = Math.max(1, Math.ceil(total / pageSize));
  return (
    <nav class="pagination" aria-label="Pages">
      <button type="button" class="button" disabled={page <= 1} onClick={() => onPage(page - 1)} aria-label="Previous page">
        ‹ Prev
      </button>
      <span aria-live="polite">
        Page {Math.min(page, pages)} of {pages} · {total} jobs
      </span>
      <button type="button" class="button" disabled={page >= pages} onClick={() => onPage(page + 1)} aria-label="Next page">
        Next ›
      </button>
    </nav>
  );
}

export function EtaText({ job }: { job: Pick<Job, 'etaSeconds' | 'status'> }) {
  return <>{job.status === 'ENCODING' || job.status === 'ANALYZING' ? formatEta(job.etaSeconds) : '—'}</>;
}

/** Past this many segments the strip's cells lose their gaps and borders, so they still fit. */
const DENSE_SEGMENTS = 48;

/**
 * A job's segments as a strip of equal cells in index order, each coloured by the node that
 * encodes it (striped while encoding, solid once done, grey while queued), with a summary line
 * and a legend of the nodes. Nothing for a job without segments.
 */
export function SegmentStrip({ segments }: { segments: readonly Segment[] }) {
  if (segments.length === 0) return null;
  const cells = segmentCells(segments);
  const shares = nodeShares(segments);
  const queued = segments.filter((segment) => segment.status === 'QUEUED').length;
  const helped = segments.some((segment) => segment.helper && segment.status !== 'QUEUED');
  return (
    <div class="segments">
      <p class="segment-summary">{segmentSummary(segments)}</p>
      <ol class={`segment-strip${cells.length > DENSE_SEGMENTS ? ' segment-strip-dense' : ''}`} aria-label="Segments in order">
        {cells.map(({ segment, label, colour }) => (
          <li
            key={segment.index}
            class={`segment segment-${segment.status.toLowerCase()}${colour === null ? '' : ` node-c${colour}`}${segment.helper ? ' segment-helper' : ''}`}
            title={label}
          >
            <span class="sr-only">{label}</span>
          </li>
        ))}
      </ol>
      <ul class="legend segment-legend" aria-label="Segments by node">
        {shares.map((share) => (
          <li key={share.node}>
            <span class={`swatch swatch-node node-c${share.colour}`} aria-hidden="true" /> <strong>{share.node}</strong>: {shareText(share)}
          </li>
        ))}
        {queued > 0 && (
          <li>
            <span class="swatch swatch-queued" aria-hidden="true" /> Queued: {queued}
          </li>
        )}
        {helped && (
          <li>
            <span class="swatch swatch-helper" aria-hidden="true" /> Encoded by a helper slot
          </li>
        )}
      </ul>
    </div>
  );
}
