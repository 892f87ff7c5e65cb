import { failureChart, SAVINGS_BOX, savingsChart } from '../charts';
import { Alert, Loading, Stat } from '../components';
import { Table } from '../widgets/Table';
import {
  DASH,
  efficiencyReading,
  formatBytes,
  formatDateTime,
  formatDuration,
  formatFps,
  formatFraction,
  formatNumber,
  formatPercent,
  formatShortDate,
} from '../format';
import { useResource } from '../hooks';
import { routeHref } from '../router';
import { api } from '../session';
import type { CodecShare, FailureBreakdown, SavingsDay } from '../types';

export function Insights() {
  const stats = useResource(() => api.insightStats(), []);
  const savings = useResource(() => api.savings(30), []);
  const nodes = useResource(() => api.nodePerformance(), []);
  const codecs = useResource(() => api.codecs(), []);
  const failures = useResource(() => api.failures(30), []);
  const data = stats.data;
  const reading = efficiencyReading(data?.encodingTime.efficiency);

  return (
    <div class="page">
      <header class="page-head">
        <h1>Insights</h1>
      </header>
      <Alert message={stats.error ?? savings.error ?? nodes.error ?? codecs.error ?? failures.error} />

      {data ? (
        <div class="stats stats-wide card">
          <Stat label="Space saved" value={formatBytes(data.storage.totalSavedBytes)} hint={`${formatNumber(data.storage.filesProcessed)} files processed`} />
          <Stat label="Average saving" value={formatPercent(data.storage.averageSavingsPercent, 1)} hint="per file" />
          <Stat label="Completed (30 days)" value={formatNumber(data.totals.completed)} hint={`${formatBytes(data.totals.savedBytes)} saved`} />
          <Stat label="Average speed" value={formatFps(data.totals.averageFps)} />
          <Stat
            label="Encoding time"
            value={formatDuration(data.encodingTime.wallSeconds)}
            hint={`CPU ${formatDuration(data.encodingTime.cpuSeconds)}`}
          />
          <Stat
            label="Efficiency"
            value={formatNumber(data.encodingTime.efficiency, 2)}
            hint={reading ? <span class={reading === 'poor' ? 'text-bad' : reading === 'good' ? '' : 'text-ok'}>{reading}</span> : 'CPU time / wall time'}
          />
        </div>
      ) : (
        stats.loading && <Loading what="statistics" />
      )}

      <section class="card" aria-labelledby="savings-title">
        <h2 id="savings-title">Savings, last 30 days</h2>
        {savings.data ? <SavingsChart days={savings.data.days} /> : savings.loading && <Loading what="the savings trend" />}
      </section>

      <div class="grid grid-2">
        <section class="card" aria-labelledby="codecs-title">
          <h2 id="codecs-title">Codecs in the libraries</h2>
          {codecs.data ? <CodecBars codecs={codecs.data} /> : codecs.loading && <Loading what="codecs" />}
        </section>

        <section class="card" aria-labelledby="nodeperf-title">
          <h2 id="nodeperf-title">Node performance</h2>
          {nodes.data &&
            (nodes.data.length === 0 ? (
              <p class="muted">No finished jobs yet.</p>
            ) : (
              <Table columns={['Node', 'Jobs', 'Success', 'Saved', 'Per hour']}>
                {nodes.data.map((row) => (
                  <tr key={row.node}>
                    <td data-label="Node">{row.node}</td>
                    <td data-label="Jobs">{formatNumber(row.jobs)}</td>
                    <td data-label="Success">{formatFraction(row.successRate)}</td>
                    <td data-label="Saved">{formatBytes(row.savedBytes)}</td>
                    <td data-label="Per hour">{formatNumber(row.throughputPerHour, 1)}</td>
                  </tr>
                ))}
              </Table>
            ))}
        </section>
      </div>

      <section class="card" aria-labelledby="failure-categories-title">
        <h2 id="failure-categories-title">Failures by category, last 30 days</h2>
        {failures.data ? <FailureCategories breakdown={failures.data} /> : failures.loading && <Loading what="failures by category" />}
      </section>

      {data && (
        <div class="grid grid-2">
          <section class="card" aria-labelledby="history-title">
            <h2 id="history-title">History</h2>
            <Table
              columns={['Date', 'Completed', 'Saved', 'Avg speed']}
              stack={false}
              scroll
              footer={
                <tr>
                  <th scope="row">30 days</th>
                  <td>{formatNumber(data.totals.completed)}</td>
                  <td>{formatBytes(data.totals.savedBytes)}</td>
                  <td>{formatFps(data.totals.averageFps)}</td>
                </tr>
              }
            >
              {[...data.history].reverse().map((day) => (
                <tr key={day.date}>
                  <td>
                    <time dateTime={day.date}>{formatShortDate(day.date)}</time>
                  </td>
                  <td>{formatNumber(day.completed)}</td>
                  <td>{formatBytes(day.savedBytes)}</td>
                  <td>{day.completed > 0 ? formatFps(day.averageFps) : DASH}</td>
                </tr>
              ))}
            </Table>
          </section>

          {data.vmaf.length > 0 && (
            <section class="card" aria-labelledby="vmaf-title">
              <h2 id="vmaf-title">Quality per library (VMAF)</h2>
              <Table columns={['Library', 'Jobs', 'Mean VMAF', 'Lowest 5th percentile', 'Mean CRF']} stack={false}>
                {data.vmaf.map((row) => (
                  <tr key={row.libraryId ?? 'none'}>
                    <th scope="row">{row.libraryName ?? 'no library'}</th>
                    <td>{formatNumber(row.jobs)}</td>
                    <td>{row.meanVmaf != null ? formatNumber(row.meanVmaf, 2) : DASH}</td>
                    <td>{row.lowestP5 != null ? formatNumber(row.lowestP5, 2) : DASH}</td>
                    <td>{row.meanQuality != null ? formatNumber(row.meanQuality, 1) : DASH}</td>
                  </tr>
                ))}
              </Table>
            </section>
          )}

          <section class="card" aria-labelledby="failed-title">
            <h2 id="failed-title">Failed jobs</h2>
            {data.failedJobs.length === 0 ? (
              <p class="muted">No failures in the last 30 days.</p>
            ) : (
              <ul class="failures">
                {data.failedJobs.map((failure) => (
                  <li key={`${failure.jobId}-${failure.date}`}>
                    <a href={routeHref(`/jobs/${failure.jobId}`)} class="file-name">
                      {failure.fileName}
                    </a>
                    <div class="text-bad">{failure.reason}</div>
                    <div class="muted small">
                      {failure.node ?? 'no node'} · {formatDateTime(failure.date)}
                    </div>
                  </li>
                ))}
              </ul>
            )}
          </section>
        </div>
      )}
    </div>
  );
}

function SavingsChart({ days }: { days: SavingsDay[] }) {
  if (days.length === 0) return <p class="muted">No savings recorded yet.</p>;
  // No room for labels below the baseline: the dates are drawn in HTML under the chart.
  const chart = savingsChart(days, { ...SAVINGS_BOX, padding: { ...SAVINGS_BOX.padding, bottom: 2 } });
  const { width, height } = chart.box;
  const last = days[days.length - 1];
  const labelIndexes = [...new Set([0, Math.floor((days.length - 1) / 2), days.length - 1])];
  const summary = `Daily savings up to ${formatBytes(chart.maxDaily)} per day; ${formatBytes(last.cumulativeBytes)} saved in total by ${last.date}.`;
  return (
    <figure class="chart">
      {/* Stretched to the card's width at a fixed height; the dates are HTML below it, so their
          size does not follow the drawing's scale (tiny on a phone, huge on a wide screen). */}
      <svg viewBox={`0 0 ${width} ${height}`} preserveAspectRatio="none" role="img" aria-label={summary}>
        <title>{summary}</title>
        <line class="chart-axis" x1={chart.box.padding.left} x2={width - chart.box.padding.right} y1={chart.baseline} y2={chart.baseline} />
        {chart.bars.map((bar) => (
          <rect key={bar.date} class="chart-bar" x={bar.x} y={bar.y} width={bar.width} height={bar.height}>
            <title>{`${bar.date}: ${formatBytes(bar.savedBytes)}`}</title>
          </rect>
        ))}
        <path class="chart-line" d={chart.linePath} />
      </svg>
      <div class="chart-dates" aria-hidden="true">
        {labelIndexes.map((i) => (
          <span key={i}>{formatShortDate(days[i].date)}</span>
        ))}
      </div>
      <figcaption class="legend">
        <span>
          <span class="swatch swatch-bar" aria-hidden="true" /> Daily (max {formatBytes(chart.maxDaily)})
        </span>
        <span>
          <span class="swatch swatch-line" aria-hidden="true" /> Cumulative ({formatBytes(chart.maxCumulative)})
        </span>
      </figcaption>
    </figure>
  );
}

function CodecBars({ codecs }: { codecs: CodecShare[] }) {
  const total = codecs.reduce((sum, codec) => sum + codec.count, 0);
  if (total === 0) return <p class="muted">No files scanned yet.</p>;
  return (
    <ul class="bars">
      {codecs.map((codec) => {
        const percent = (codec.count / total) * 100;
        return (
          <li key={codec.codec}>
            <span class="bar-label">{codec.codec.toUpperCase()}</span>
            <span class="bar-track" aria-hidden="true">
              <span class="bar-fill" style={{ width: `${percent}%` }} />
            </span>
            <span class="bar-value">
              {formatPercent(percent)} <span class="muted small">({formatNumber(codec.count)})</span>
            </span>
          </li>
        );
      })}
    </ul>
  );
}

function FailureCategories({ breakdown }: { breakdown: FailureBreakdown }) {
  if (breakdown.total === 0) return <p class="muted">No failures in the last {breakdown.days} days.</p>;
  const chart = failureChart(breakdown.categories);
  const { width, height } = chart.box;
  const summary = `${formatNumber(chart.total)} failed jobs: ${chart.segments
    .map((segment) => `${segment.label} ${formatFraction(segment.share)}`)
    .join(', ')}.`;
  const fill = (colour: number) => `var(--node-${colour % 8})`;
  return (
    <figure class="chart">
      {/* One bar across the card, at a fixed height; its parts are named in the table below. */}
      <svg viewBox={`0 0 ${width} ${height}`} preserveAspectRatio="none" role="img" aria-label={summary} style={{ height: '24px' }}>
        <title>{summary}</title>
        {chart.segments.map((segment) => (
          <rect key={segment.category} class="chart-segment" x={segment.x} y={segment.y} width={segment.width} height={segment.height} style={{ fill: fill(segment.colour) }}>
            <title>{`${segment.label}: ${formatNumber(segment.count)} (${formatFraction(segment.share)})`}</title>
          </rect>
        ))}
      </svg>
      <figcaption>
        {/* Three narrow columns fit a phone as a table; stacked cards would bury the reasons. */}
        <div class="table-wrap">
          <table class="table">
            <thead>
              <tr>
                <th scope="col">Category and reasons</th>
                <th scope="col">Failed jobs</th>
                <th scope="col">Share</th>
              </tr>
            </thead>
            {chart.segments.map((segment) => (
              <tbody key={segment.category} data-category={segment.category}>
                <tr>
                  <th scope="rowgroup">
                    <span class="swatch" aria-hidden="true" style={{ background: fill(segment.colour) }} /> {segment.label}
                  </th>
                  <td>{formatNumber(segment.count)}</td>
                  <td>{formatFraction(segment.share)}</td>
                </tr>
                {segment.reasons.map((reason) => (
                  <tr key={reason.code} class="muted">
                    {/* Indented under its category, past the swatch. */}
                    <td style={{ paddingLeft: '28px' }}>{reason.reason}</td>
                    <td>{formatNumber(reason.count)}</td>
                    <td>{formatFraction(reason.count / chart.total)}</td>
                  </tr>
                ))}
              </tbody>
            ))}
          </table>
        </div>
      </figcaption>
    </figure>
  );
}
