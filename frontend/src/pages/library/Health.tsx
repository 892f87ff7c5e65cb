// A library's health (issue 38): start a check (quick or thorough, every file or only those
// changed since their last ok), follow it, cancel it; the last run's counts; the damaged and
// unreadable files with their first error, and what to do about each: check it again, ignore
// it (or stop), or have the Sonarr or Radarr that holds it get a new copy. Read every 2 s while
// a run or a re-check is under way. Viewers see; operators act (as the API allows).
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorMessage } from '../../api';
import { Alert, Badge } from '../../components';
import { formatBytes, formatDateTime, formatNumber, formatRelative } from '../../format';
import {
  DEPTH_CHOICES,
  errorCountText,
  fileNameOf,
  findingsOf,
  findingText,
  newCopyQuestion,
  recheckOutcome,
  runPercent,
  runSummary,
  sourcesText,
} from '../../health';
import { useAction, useRole } from '../../hooks';
import { allows, api } from '../../session';
import type { FileHealth, HealthDepth, Library, LibraryHealth } from '../../types';
import { Table } from '../../widgets/Table';

const POLL_MS = 2000;
/** Findings come first in the server's order: one page of this many holds them, page after page. */
const PAGE_SIZE = 100;
/** A re-check waits for an idle slot; past this the panel stops looking and says so. */
const RECHECK_WAIT_MS = 120_000;

/** What an action on one file left beside it. */
interface Note {
  text: string;
  tone: 'ok' | 'bad' | 'muted';
}

const TONE_CLASS: Record<Note['tone'], string> = { ok: 'text-ok', bad: 'text-bad', muted: 'muted' };

/** A re-check on its way: the result as it was, and when it was asked for. */
interface Pending {
  before: FileHealth;
  since: number;
}

export function HealthPanel({ library }: { library: Library }) {
  const role = useRole();
  const acts = allows(role, 'operator');
  const [health, setHealth] = useState<LibraryHealth | null>(null);
  const { busy, error, run: runAction, setError } = useAction();
  const [notice, setNotice] = useState<string | null>(null);
  const [depth, setDepth] = useState<HealthDepth>('quick');
  const [all, setAll] = useState(false);
  const [page, setPage] = useState(1);
  const [notes, setNotes] = useState<Record<number, Note>>({});
  const [acting, setActing] = useState<number | null>(null);
  const pending = useRef<Map<number, Pending>>(new Map());
  const [waiting, setWaiting] = useState(0);

  const note = (id: number, text: string, tone: Note['tone']) => setNotes((current) => ({ ...current, [id]: { text, tone } }));

  const load = async () => {
    try {
      const read = await api.libraryHealth(library.id, { page, pageSize: PAGE_SIZE });
      setHealth(read);
      // Re-checks asked for: done once their result is newer, or gone from the findings.
      const everyFinding = read.page === 1 && findingsOf(read.counts) <= read.files.length;
      for (const [id, { before, since }] of pending.current) {
        const outcome = recheckOutcome(before, read.files, everyFinding);
        if (outcome.done) {
          pending.current.delete(id);
          if (read.files.some((file) => file.id === id && file.verdict !== 'ok')) note(id, outcome.text, outcome.ok ? 'ok' : 'bad');
          else setNotice(`${fileNameOf(before.path)}: ${outcome.text}`);
        } else if (Date.now() - since > RECHECK_WAIT_MS) {
          pending.current.delete(id);
          note(id, 'The check again waits for an idle slot; its result shows here once read.', 'muted');
        }
      }
      setWaiting(pending.current.size);
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  useEffect(() => {
    void load();
  }, [library.id, page]);

  const running = health?.run?.status === 'RUNNING';
  useEffect(() => {
    if (!running && waiting === 0) return undefined;
    const timer = setInterval(() => void load(), POLL_MS);
    return () => clearInterval(timer);
  }, [running, waiting > 0, library.id, page]);

  const act = (action: () => Promise<unknown>) => {
    setNotice(null);
    return runAction(async () => {
      await action();
      await load();
    });
  };

  /** One file's action; its result, or the server's refusal, lands beside the file. */
  const onFile = async (file: FileHealth, action: () => Promise<string | null>) => {
    setActing(file.id);
    try {
      const said = await action();
      if (said) note(file.id, said, 'ok');
    } catch (err) {
      note(file.id, errorMessage(err), 'bad');
    } finally {
      setActing(null);
    }
  };

  const recheck = (file: FileHealth) =>
    onFile(file, async () => {
      await api.recheckLibraryFile(library.id, file.id);
      pending.current.set(file.id, { before: file, since: Date.now() });
      setWaiting(pending.current.size);
      return 'Checking again…';
    });

  const ignore = (file: FileHealth, ignored: boolean) =>
    onFile(file, async () => {
      await api.ignoreLibraryFile(library.id, file.id, ignored);
      await load();
      setNotice(ignored ? `Ignored ${fileNameOf(file.path)}: it may be encoded again.` : `${fileNameOf(file.path)} is a finding again.`);
      return null;
    });

  const newCopy = (file: FileHealth) => {
    if (!confirm(newCopyQuestion(file))) return;
    void onFile(file, async () => (await api.newCopyOfLibraryFile(library.id, file.id)).message);
  };

  const findings = (health?.files ?? []).filter((file) => file.verdict !== 'ok');
  const open = findings.filter((file) => !file.ignored);
  const ignored = findings.filter((file) => file.ignored);
  const pages = health ? Math.max(1, Math.ceil(findingsOf(health.counts) / PAGE_SIZE)) : 1;
  const run = health?.run ?? null;

  const rows = (files: FileHealth[]) =>
    files.map((file) => {
      const name = fileNameOf(file.path);
      const beside = notes[file.id];
      return (
        <tr key={file.id}>
          <td data-label="File" class="cell-file">
            <span class="file-name">{name}</span>
            <div class="muted small break">{file.path}</div>
          </td>
          <td data-label="Finding">
            <Badge value={file.verdict} />
            <div class={file.verdict === 'damaged' ? 'text-bad small' : 'text-warn small'}>{findingText(file)}</div>
            {beside && (
              <div class={`small ${TONE_CLASS[beside.tone]}`} role="status" aria-label={`Result for ${name}`}>
                {beside.text}
              </div>
            )}
          </td>
          <td data-label="Errors">{file.verdict === 'damaged' ? errorCountText(file.errorCount) : '—'}</td>
          <td data-label="Checked">
            <span title={formatDateTime(file.checkedAt)}>{formatRelative(file.checkedAt)}</span>
            <div class="muted small">
              {file.depth}, {formatBytes(file.size)}
              {file.node ? `, on ${file.node}` : ''}
            </div>
          </td>
          {acts && (
            <td data-label="Actions">
              <div class="actions actions-compact">
                <button
                  type="button"
                  class="button button-small"
                  disabled={acting === file.id || pending.current.has(file.id)}
                  aria-label={`Check ${name} again`}
                  onClick={() => void recheck(file)}
                >
                  Check again
                </button>
                <button
                  type="button"
                  class="button button-small"
                  disabled={acting === file.id}
                  aria-label={`${file.ignored ? 'Stop ignoring' : 'Ignore'} ${name}`}
                  onClick={() => void ignore(file, !file.ignored)}
                >
                  {file.ignored ? 'Stop ignoring' : 'Ignore'}
                </button>
                {file.newCopyFrom.length > 0 && (
                  <button
                    type="button"
                    class="button button-small button-danger"
                    disabled={acting === file.id}
                    aria-label={`Get a new copy of ${name}`}
                    title={`Asks ${sourcesText(file.newCopyFrom)}`}
                    onClick={() => newCopy(file)}
                  >
                    Get a new copy
                  </button>
                )}
              </div>
            </td>
          )}
        </tr>
      );
    });

  const columns = ['File', 'Finding', 'Errors', 'Checked'];
  return (
    <section class="health" aria-label={`Health of ${library.name}`}>
      <h3>Health</h3>
      <Alert message={error} onClose={() => setError(null)} />
      <Alert kind="ok" message={notice} onClose={() => setNotice(null)} />
      <p role="status" aria-label="Last health check">
        {run && <Badge value={run.status} />} {runSummary(run)}
      </p>
      {run && running && (
        <div class="progress-wrap">
          <div
            class="progress progress-green"
            role="progressbar"
            aria-label={`Health check of ${library.name}`}
            aria-valuemin={0}
            aria-valuemax={100}
            aria-valuenow={runPercent(run)}
            aria-valuetext={`${run.filesDone} of ${run.filesTotal} files`}
          >
            <div class="progress-fill" style={{ width: `${runPercent(run)}%` }} />
          </div>
          <span class="progress-text">
            {formatNumber(run.filesDone)} / {formatNumber(run.filesTotal)}
          </span>
        </div>
      )}
      {health && (
        <dl class="inline-facts" aria-label="Files by verdict">
          <div>
            <dt>Ok</dt>
            <dd>{formatNumber(health.counts.ok)}</dd>
          </div>
          <div>
            <dt>Damaged</dt>
            <dd>{formatNumber(health.counts.damaged)}</dd>
          </div>
          <div>
            <dt>Unreadable</dt>
            <dd>{formatNumber(health.counts.unreadable)}</dd>
          </div>
          <div>
            <dt>{running ? 'Started' : 'Checked'}</dt>
            <dd>{run ? formatDateTime(running ? run.startedAt : (run.finishedAt ?? run.startedAt)) : 'never'}</dd>
          </div>
        </dl>
      )}
      {acts &&
        (running ? (
          <div class="actions">
            <button type="button" class="button" disabled={busy} onClick={() => void act(() => api.cancelLibraryHealth(library.id))}>
              Cancel check
            </button>
          </div>
        ) : (
          <form
            class="form-row health-start"
            aria-label={`Check the health of ${library.name}`}
            onSubmit={(event) => {
              event.preventDefault();
              void act(() => api.startLibraryHealth(library.id, depth, all));
            }}
          >
            <label class="field">
              <span>Depth</span>
              <select value={depth} onChange={(e) => setDepth(e.currentTarget.value as HealthDepth)}>
                {DEPTH_CHOICES.map((choice) => (
                  <option key={choice.value} value={choice.value}>
                    {choice.label}
                  </option>
                ))}
              </select>
            </label>
            <label class="check-field">
              <input type="checkbox" checked={all} onChange={(e) => setAll(e.currentTarget.checked)} />
              <span>All files, also those unchanged since found ok</span>
            </label>
            <button type="submit" class="button button-primary" disabled={busy}>
              Start check
            </button>
          </form>
        ))}

      {health && findings.length === 0 && (
        <p class="muted">{run ? 'No damaged or unreadable file found.' : 'Check the library to find damaged files before they are encoded.'}</p>
      )}
      {open.length > 0 && (
        <>
          <h4>Damaged and unreadable</h4>
          <p class="muted small">Not encoded until they change, are ignored, or a check finds them ok.</p>
          <Table caption="Damaged and unreadable files" columns={columns} actions={acts}>
            {rows(open)}
          </Table>
        </>
      )}
      {ignored.length > 0 && (
        <>
          <h4>Ignored</h4>
          <p class="muted small">Encoded as any other file; a finding again if the file changes and a check finds it damaged.</p>
          <Table caption="Ignored findings" columns={columns} actions={acts}>
            {rows(ignored)}
          </Table>
        </>
      )}
      {pages > 1 && (
        <nav class="pagination" aria-label="Pages of findings">
          <button type="button" class="button" disabled={page <= 1} onClick={() => setPage(page - 1)}>
            ‹ Prev
          </button>
          <span aria-live="polite">
            Page {Math.min(page, pages)} of {pages} · {formatNumber(health ? findingsOf(health.counts) : 0)} findings
          </span>
          <button type="button" class="button" disabled={page >= pages} onClick={() => setPage(page + 1)}>
            Next ›
          </button>
        </nav>
      )}
    </section>
  );
}
