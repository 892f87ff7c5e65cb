import { useEffect, useRef, useState } from 'preact/hooks';
import { errorMessage } from '../api';
import { Alert, Badge, EtaText, JobActionButtons, Loading, Pagination, PriorityControl, ProgressBar, TransferLine } from '../components';
import { Options } from '../widgets/Fields';
import { Table } from '../widgets/Table';
import { formatBytes, formatRelative, titleCase } from '../format';
import { useLiveMessages, useResource, useRole } from '../hooks';
import { PAGE_SIZES, applyLiveMessage, filtersFromQuery, isTerminal, parseStatuses, type JobFilters } from '../jobs';
import { navigate, routeHref, type Route } from '../router';
import { allows, api } from '../session';
import { JOB_STATUSES, type Job } from '../types';

const ACTIVE_FILTER = 'QUEUED,ANALYZING,ENCODING';

function hrefFor(filters: JobFilters): string {
  return routeHref('/jobs', {
    status: filters.status.join(','),
    libraryId: filters.libraryId,
    q: filters.q.trim(),
    page: filters.page > 1 ? filters.page : null,
    pageSize: filters.pageSize !== 50 ? filters.pageSize : null,
  });
}

export function Jobs({ route }: { route: Route }) {
  const filters = filtersFromQuery(route.query);
  const key = hrefFor(filters);
  const jobs = useResource(
    () =>
      api.jobs({
        page: filters.page,
        pageSize: filters.pageSize,
        status: filters.status,
        libraryId: filters.libraryId ?? undefined,
        q: filters.q,
        sort: 'createdAt',
        order: 'desc',
      }),
    [key],
  );
  const libraries = useResource(() => api.libraries(), []);
  const [search, setSearch] = useState(filters.q);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [bulkBusy, setBulkBusy] = useState(false);
  const reloadTimer = useRef<ReturnType<typeof setTimeout> | null>(null);

  const setFilters = (change: Partial<JobFilters>, replace = false) =>
    navigate(hrefFor({ ...filters, page: 1, ...change }), replace);

  // Search as you type, without a history entry per key stroke.
  const pushedQuery = useRef(filters.q);
  useEffect(() => {
    if (search.trim() === filters.q.trim()) return;
    const timer = setTimeout(() => {
      pushedQuery.current = search.trim();
      setFilters({ q: search }, true);
    }, 300);
    return () => clearTimeout(timer);
  }, [search]);
  // The route changed from elsewhere (navigation, back button): show its search text.
  useEffect(() => {
    if (filters.q !== pushedQuery.current) {
      pushedQuery.current = filters.q;
      setSearch(filters.q);
    }
  }, [filters.q]);
  useEffect(() => () => {
    if (reloadTimer.current) clearTimeout(reloadTimer.current);
  }, []);

  useLiveMessages((message) => {
    const page = jobs.data;
    if (!page) return;
    const known = page.items.some((job) => job.id === message.jobId);
    if (!known) {
      // A job this page does not show changed status: it may now belong here. Re-fetch, at most every 2 s.
      const fits = message.status && (filters.status.length === 0 || filters.status.includes(message.status));
      if (message.type === 'status' && fits && reloadTimer.current === null) {
        reloadTimer.current = setTimeout(() => {
          reloadTimer.current = null;
          void jobs.reload();
        }, 2_000);
      }
      return;
    }
    jobs.setData((current) => {
      if (!current) return current;
      const items = applyLiveMessage(current.items, message, {
        statuses: filters.status.length > 0 ? filters.status : undefined,
      });
      if (items === current.items) return current;
      return { ...current, items, total: current.total - (current.items.length - items.length) };
    });
  });

  const replaceJob = (job: Job) =>
    jobs.setData((current) =>
      current ? { ...current, items: current.items.map((item) => (item.id === job.id ? { ...item, ...job } : item)) } : current,
    );

  const bulk = async (which: 'pause' | 'resume') => {
    if (which === 'pause' && !confirm('Pause every queued and running job?')) return;
    setBulkBusy(true);
    setError(null);
    try {
      const { affected } = which === 'pause' ? await api.pauseAll() : await api.resumeAll();
      setNotice(`${which === 'pause' ? 'Paused' : 'Resumed'} ${affected} job${affected === 1 ? '' : 's'}.`);
      await jobs.reload();
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBulkBusy(false);
    }
  };

  const role = useRole();
  const libraryName = (id: number | null) => libraries.data?.find((library) => library.id === id)?.name ?? '—';
  const statusValue = filters.status.join(',');
  const data = jobs.data;

  return (
    <div class="page">
      <header class="page-head">
        <h1>Jobs</h1>
        {allows(role, 'operator') && (
          <div class="actions">
            <button type="button" class="button" disabled={bulkBusy} onClick={() => void bulk('pause')}>
              Pause all
            </button>
            <button type="button" class="button" disabled={bulkBusy} onClick={() => void bulk('resume')}>
              Resume all
            </button>
          </div>
        )}
      </header>

      <form class="filters card" role="search" aria-label="Filter jobs" onSubmit={(e) => e.preventDefault()}>
        <label class="field">
          <span>Status</span>
          <select value={statusValue} onChange={(e) => setFilters({ status: parseStatuses(e.currentTarget.value) })}>
            <option value="">All statuses</option>
            <option value={ACTIVE_FILTER}>Active (queued, analyzing, encoding)</option>
            <Options items={JOB_STATUSES} value={(status) => status} label={titleCase} />
            {statusValue && statusValue !== ACTIVE_FILTER && !(JOB_STATUSES as readonly string[]).includes(statusValue) && (
              <option value={statusValue}>{filters.status.map(titleCase).join(', ')}</option>
            )}
          </select>
        </label>
        <label class="field">
          <span>Library</span>
          <select
            value={filters.libraryId ?? ''}
            onChange={(e) => setFilters({ libraryId: e.currentTarget.value ? Number(e.currentTarget.value) : null })}
          >
            <option value="">All libraries</option>
            <Options items={libraries.data ?? []} value={(library) => library.id} label={(library) => library.name} />
          </select>
        </label>
        <label class="field field-grow">
          <span>Search</span>
          <input type="search" placeholder="File name or path" value={search} onInput={(e) => setSearch(e.currentTarget.value)} />
        </label>
        <label class="field">
          <span>Per page</span>
          <select value={filters.pageSize} onChange={(e) => setFilters({ pageSize: Number(e.currentTarget.value) })}>
            <Options items={PAGE_SIZES} value={(size) => size} label={(size) => size} />
          </select>
        </label>
      </form>

      <Alert message={jobs.error} />
      <Alert message={error} onClose={() => setError(null)} />
      <Alert kind="ok" message={notice} onClose={() => setNotice(null)} />

      {!data ? (
        jobs.loading && <Loading what="jobs" />
      ) : data.items.length === 0 ? (
        <p class="card muted">No jobs match these filters.</p>
      ) : (
        <>
          <Table caption="Jobs, newest first" columns={['File', 'Status', 'Progress', 'Priority', 'Node', 'ETA', 'Saved', 'Updated']} actions>
            {data.items.map((job) => (
              <tr key={job.id}>
                <td data-label="File" class="cell-file">
                  <a href={routeHref(`/jobs/${job.id}`)} class="file-name" title={job.filePath}>
                    {job.fileName}
                  </a>
                  <div class="muted small">{libraryName(job.libraryId ?? null)}</div>
                </td>
                <td data-label="Status">
                  <Badge value={job.status} />
                  {job.stage && !isTerminal(job.status) && <div class="muted small">{titleCase(job.stage)}</div>}
                  {job.status === 'FAILED' && job.failureReason && <div class="text-bad small">{job.failureReason}</div>}
                  {job.status === 'SKIPPED' && job.skipReason && <div class="muted small">{job.skipReason}</div>}
                </td>
                <td data-label="Progress" class="cell-progress">
                  {job.status === 'PENDING' || job.status === 'SKIPPED' ? '—' : <ProgressBar job={job} />}
                  <TransferLine job={job} />
                </td>
                <td data-label="Priority">
                  <PriorityControl job={job} compact onChanged={replaceJob} onError={setError} />
                </td>
                <td data-label="Node">{job.node ?? '—'}</td>
                <td data-label="ETA">
                  <EtaText job={job} />
                </td>
                <td data-label="Saved">{formatBytes(job.savedBytes)}</td>
                <td data-label="Updated">{formatRelative(job.updatedAt)}</td>
                <td data-label="Actions">
                  <JobActionButtons job={job} compact onChanged={replaceJob} onError={setError} />
                </td>
              </tr>
            ))}
          </Table>
          <Pagination
            page={data.page}
            pageSize={data.pageSize}
            total={data.total}
            onPage={(page) => navigate(hrefFor({ ...filters, page }))}
          />
        </>
      )}
    </div>
  );
}
