// Job rules the dashboard applies: progress colour, action labels, live-message merging.
// Which actions a job allows is the server's to say (`job.actions`).
import { formatBytes, formatRate } from './format';
import { JOB_STATUSES, type Job, type JobAction, type JobStatus, type LiveMessage, type Transfer } from './types';

/** A live message as far as it was read: its type and job, and any of the other fields. */
export type LiveUpdate = Pick<LiveMessage, 'type' | 'jobId'> & Partial<LiveMessage>;

export type ProgressColour = 'green' | 'yellow' | 'red' | 'neutral';

/**
 * Spec: red when stalled (no progress for more than 10 minutes), green above 5 fps,
 * yellow from 1 to 5 fps inclusive (CPU-only speed). Below 1 fps or without a speed
 * (analysing, transferring, queued) the bar is neutral.
 */
export function progressColour(job: { fps: number | null; stalled: boolean }): ProgressColour {
  if (job.stalled) return 'red';
  const fps = job.fps;
  if (fps == null || !Number.isFinite(fps)) return 'neutral';
  if (fps > 5) return 'green';
  if (fps >= 1) return 'yellow';
  return 'neutral';
}

export const TERMINAL_STATUSES: readonly JobStatus[] = ['COMPLETED', 'SKIPPED', 'FAILED', 'CANCELLED'];
/** Statuses in which a job occupies a worker and shows live progress. */
export const RUNNING_STATUSES: readonly JobStatus[] = ['ANALYZING', 'ENCODING'];

export function isTerminal(status: JobStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

export const ACTION_LABELS: Record<JobAction, string> = {
  pause: 'Pause',
  resume: 'Resume',
  retry: 'Retry',
  cancel: 'Cancel',
  force: 'Force re-encode',
};

const LIVE_FIELDS = ['progress', 'status', 'fps', 'stage', 'etaSeconds', 'node', 'stalled', 'fileName', 'actions'] as const;

export interface ApplyOptions {
  /** Add jobs the list does not hold yet (e.g. active jobs, first page of an unfiltered list). */
  insert?: boolean;
  /** When set, a job whose new status is not in this list leaves the list. */
  statuses?: readonly JobStatus[];
  /** Upper bound on the list length after an insert (the page size). */
  limit?: number;
}

/** A transferring job's file on the move: "Downloading 1.5 MiB of 5.0 MiB · 500 KiB/s". */
export function transferText(transfer: Transfer): string {
  const way = transfer.direction === 'download' ? 'Downloading' : 'Uploading';
  return `${way} ${formatBytes(transfer.bytes)} of ${formatBytes(transfer.total)} · ${formatRate(transfer.rateBytesPerSecond)}`;
}

/** Merge the fields a live message carries into a job; fields the message omits are kept. */
export function mergeLive<T extends Job>(job: T, message: LiveUpdate): T {
  const next = { ...job } as T;
  // A job moves a file only while its messages say so: each one without a transfer ends it.
  next.transfer = message.transfer ?? null;
  const target = next as unknown as Record<string, unknown>;
  for (const field of LIVE_FIELDS) {
    const value = message[field];
    if (value !== undefined) target[field] = value;
  }
  if (message.status && isTerminal(message.status)) {
    // A finished job no longer runs: nothing to estimate, nothing stalled.
    if (message.stage === undefined) next.stage = null;
    if (message.etaSeconds === undefined) next.etaSeconds = null;
    if (message.stalled === undefined) next.stalled = false;
    if (message.status === 'COMPLETED' && message.progress === undefined) next.progress = 100;
  }
  return next;
}

/**
 * A job record built from a live message alone, for jobs the list did not hold. What the
 * message does not say (sizes, codecs, library) stays empty until the list is fetched again.
 */
export function jobFromLive(message: LiveUpdate, now: string = new Date().toISOString()): Job {
  const base: Job = {
    id: message.jobId,
    fileName: message.fileName ?? `Job ${message.jobId}`,
    filePath: '',
    libraryId: null,
    status: message.status ?? 'QUEUED',
    stage: null,
    progress: 0,
    fps: 0,
    node: null,
    etaSeconds: null,
    retryCount: 0,
    failureReason: null,
    failureCode: null,
    stalled: false,
    sourceCodec: null,
    targetCodec: 'hevc',
    sourceSize: 0,
    outputSize: null,
    savedBytes: 0,
    createdAt: now,
    startedAt: null,
    completedAt: null,
    updatedAt: now,
    actions: [],
    priority: 0,
  };
  return mergeLive(base, message);
}

const LIVE_TYPES = new Set(['snapshot', 'progress', 'status']);

/**
 * Apply one WebSocket message to a job list and return the new list (the same array
 * when nothing changed, so a state setter can skip a render).
 */
export function applyLiveMessage(jobs: Job[], message: LiveUpdate, options: ApplyOptions = {}): Job[] {
  if (!LIVE_TYPES.has(message.type) || typeof message.jobId !== 'number') return jobs;
  const index = jobs.findIndex((job) => job.id === message.jobId);
  const { statuses } = options;
  if (index >= 0) {
    const updated = mergeLive(jobs[index], message);
    if (statuses && !statuses.includes(updated.status)) {
      return jobs.filter((_, i) => i !== index);
    }
    const next = jobs.slice();
    next[index] = updated;
    return next;
  }
  if (!options.insert) return jobs;
  const created = jobFromLive(message);
  if (statuses && !statuses.includes(created.status)) return jobs;
  const next = [created, ...jobs];
  return options.limit != null && next.length > options.limit ? next.slice(0, options.limit) : next;
}

// Filters of the jobs list, kept in the route's query string.

export const PAGE_SIZES = [25, 50, 100];

export interface JobFilters {
  status: JobStatus[];
  libraryId: number | null;
  q: string;
  page: number;
  pageSize: number;
}

/** "QUEUED,ENCODING" -> ["QUEUED", "ENCODING"]; unknown names are dropped. */
export function parseStatuses(value: string | null): JobStatus[] {
  return (value ?? '').split(',').filter((name): name is JobStatus => (JOB_STATUSES as readonly string[]).includes(name));
}

export function filtersFromQuery(query: URLSearchParams): JobFilters {
  const status = parseStatuses(query.get('status'));
  const libraryId = Number(query.get('libraryId'));
  const page = Number(query.get('page'));
  const pageSize = Number(query.get('pageSize'));
  return {
    status,
    libraryId: Number.isInteger(libraryId) && libraryId > 0 ? libraryId : null,
    q: query.get('q') ?? '',
    page: Number.isInteger(page) && page > 0 ? page : 1,
    pageSize: PAGE_SIZES.includes(pageSize) ? pageSize : 50,
  };
}

