// A library's forecast: what encoding its files would save and take, computed on the server
// in the background without encoding anything (POST /libraries/{id}/forecast), read here
// every 2 s while it runs.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, errorMessage } from '../api';
import { Alert, Badge } from '../components';
import { Table } from '../widgets/Table';
import { formatBytes, formatDuration, formatPercent } from '../format';
import { allows, api } from '../session';
import { useAction, useRole } from '../hooks';
import type { Forecast, ForecastFile, Library } from '../types';

const POLL_MS = 2000;

export function ForecastPanel({ library }: { library: Library }) {
  const role = useRole();
  const [forecast, setForecast] = useState<Forecast | null>(null);
  const [missing, setMissing] = useState(false);
  const { busy, error, run, setError } = useAction();

  const load = async () => {
    try {
      setForecast(await api.forecast(library.id));
      setMissing(false);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) setMissing(true);
      else setError(errorMessage(err));
    }
  };

  useEffect(() => {
    void load();
  }, [library.id]);

  const running = forecast?.status === 'RUNNING';
  useEffect(() => {
    if (!running) return undefined;
    const timer = setInterval(() => void load(), POLL_MS);
    return () => clearInterval(timer);
  }, [running, library.id]);

  const act = (action: () => Promise<unknown>) =>
    run(async () => {
      await action();
      await load();
    });

  return (
    <section class="forecast" aria-label={`Forecast of ${library.name}`}>
      <Alert message={error} onClose={() => setError(null)} />
      {missing && <p class="muted">Not forecast yet: see what encoding this library would save before anything changes.</p>}
      {forecast && <ForecastSummary forecast={forecast} />}
      {allows(role, 'operator') && (
        <div class="actions">
          {running ? (
            <button type="button" class="button" disabled={busy} onClick={() => void act(() => api.cancelForecast(library.id))}>
              Cancel forecast
            </button>
          ) : (
            <button type="button" class="button" disabled={busy} onClick={() => void act(() => api.startForecast(library.id))}>
              {forecast ? 'Forecast again' : 'Start forecast'}
            </button>
          )}
        </div>
      )}
    </section>
  );
}

function ForecastSummary({ forecast }: { forecast: Forecast }) {
  const { totals } = forecast;
  return (
    <>
      <p>
        <Badge value={forecast.status} /> {forecast.filesDone} of {forecast.filesTotal} files
      </p>
      <dl class="inline-facts">
        <div>
          <dt>Would save</dt>
          <dd>
            {formatBytes(totals.savedBytes)} ({formatPercent(totals.savedPercent)})
          </dd>
        </div>
        <div>
          <dt>Size now → predicted</dt>
          <dd>
            {formatBytes(totals.currentSize)} → {formatBytes(totals.predictedSize)}
          </dd>
        </div>
        <div>
          <dt>Encode time</dt>
          <dd>
            {formatDuration(totals.predictedWallSeconds)} on {forecast.slots} slot{forecast.slots === 1 ? '' : 's'}
          </dd>
        </div>
        <div>
          <dt>Skipped</dt>
          <dd>{totals.skipped}</dd>
        </div>
      </dl>
      {forecast.files.length > 0 && <ForecastChart files={forecast.files} />}
      <Table columns={['File', 'Now', 'Predicted', 'CRF', 'VMAF', 'Time']} stack={false}>
        {forecast.files.map((file) => (
          <tr key={file.jobId}>
            <th scope="row" class="file-name">
              {file.fileName}
              {file.skipReason && <div class="muted small">Skipped: {file.skipReason}</div>}
              {file.error && <div class="text-bad small">{file.error}</div>}
            </th>
            <td>{formatBytes(file.currentSize)}</td>
            <td>{file.predictedSize != null ? formatBytes(file.predictedSize) : '—'}</td>
            <td>{file.quality ?? '—'}</td>
            <td>{file.vmaf != null ? file.vmaf.toFixed(1) : '—'}</td>
            <td>{file.predictedSeconds != null ? formatDuration(file.predictedSeconds) : '—'}</td>
          </tr>
        ))}
      </Table>
    </>
  );
}

/** Each file's size now (the full bar) and predicted (the filled part), to one scale. */
function ForecastChart({ files }: { files: ForecastFile[] }) {
  const largest = Math.max(1, ...files.map((f) => f.currentSize));
  const rowHeight = 14;
  const height = files.length * rowHeight;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 100 ${height}`} preserveAspectRatio="none" role="img" aria-label="Size now and predicted, per file">
        {files.map((file, i) => {
          const now = (file.currentSize / largest) * 100;
          const predicted = file.predictedSize != null ? (Math.min(file.predictedSize, file.currentSize) / largest) * 100 : now;
          return (
            <g key={file.jobId}>
              <rect class="chart-bar-now" x={0} y={i * rowHeight + 2} width={now} height={rowHeight - 4} />
              <rect class="chart-bar" x={0} y={i * rowHeight + 2} width={predicted} height={rowHeight - 4} />
            </g>
          );
        })}
      </svg>
      <figcaption class="muted small">Per file: size now (light) and predicted (dark).</figcaption>
    </figure>
  );
}
