import { describe, expect, it } from 'vitest';
import { failureChart, savingsChart, sparklinePath, type ChartBox } from '../src/charts';
import type { FailureCategoryShare } from '../src/types';

// A 100 x 60 plot area starting at (10, 5): slots are 100 / n wide.
const box: ChartBox = { width: 120, height: 80, padding: { top: 5, right: 10, bottom: 15, left: 10 } };

describe('savingsChart', () => {
  const days = [
    { date: '2024-05-01', savedBytes: 100, cumulativeBytes: 100 },
    { date: '2024-05-02', savedBytes: 0, cumulativeBytes: 100 },
    { date: '2024-05-03', savedBytes: 50, cumulativeBytes: 150 },
    { date: '2024-05-04', savedBytes: 150, cumulativeBytes: 300 },
  ];

  it('places one bar per day, centred in its slot, scaled to the largest day', () => {
    const chart = savingsChart(days, box);
    expect(chart.maxDaily).toBe(150);
    expect(chart.baseline).toBe(65);
    expect(chart.bars).toEqual([
      { date: '2024-05-01', savedBytes: 100, x: 13.75, y: 25, width: 17.5, height: 40 },
      { date: '2024-05-02', savedBytes: 0, x: 38.75, y: 65, width: 17.5, height: 0 },
      { date: '2024-05-03', savedBytes: 50, x: 63.75, y: 45, width: 17.5, height: 20 },
      { date: '2024-05-04', savedBytes: 150, x: 88.75, y: 5, width: 17.5, height: 60 },
    ]);
  });

  it('draws the cumulative line on its own scale through the slot centres', () => {
    const chart = savingsChart(days, box);
    expect(chart.maxCumulative).toBe(300);
    expect(chart.points.map((p) => [p.x, p.y])).toEqual([
      [22.5, 45],
      [47.5, 45],
      [72.5, 35],
      [97.5, 5],
    ]);
    expect(chart.linePath).toBe('M22.5 45 L47.5 45 L72.5 35 L97.5 5');
  });

  it('keeps an all-zero series flat on the baseline (no division by zero)', () => {
    const chart = savingsChart(
      [
        { date: 'a', savedBytes: 0, cumulativeBytes: 0 },
        { date: 'b', savedBytes: 0, cumulativeBytes: 0 },
      ],
      box,
    );
    expect(chart.bars.every((bar) => bar.height === 0 && bar.y === 65)).toBe(true);
    expect(chart.points.every((point) => point.y === 65)).toBe(true);
  });

  it('puts a negative day (outputs grew) on the baseline', () => {
    const chart = savingsChart(
      [
        { date: 'a', savedBytes: -40, cumulativeBytes: -40 },
        { date: 'b', savedBytes: 80, cumulativeBytes: 40 },
      ],
      box,
    );
    expect(chart.bars[0]).toMatchObject({ height: 0, y: 65 });
    expect(chart.bars[1]).toMatchObject({ height: 60, y: 5 });
    expect(chart.points[0].y).toBe(65);
  });

  it('handles no data and a single day', () => {
    expect(savingsChart([], box)).toMatchObject({ bars: [], points: [], linePath: '', maxDaily: 0 });
    const one = savingsChart([{ date: 'a', savedBytes: 10, cumulativeBytes: 10 }], box);
    expect(one.bars[0]).toMatchObject({ x: 25, width: 70, height: 60 });
    expect(one.points[0]).toMatchObject({ x: 60, y: 5 });
  });
});

describe('sparklinePath', () => {
  it('spreads values over the width on a 0-100 scale', () => {
    expect(sparklinePath([0, 50, 100], 100, 20)).toBe('M0 20 L50 10 L100 0');
    expect(sparklinePath([], 100, 20)).toBe('');
  });
});

describe('failureChart', () => {
  // Every category in the server's order; `counts` per reason code.
  const categories = (counts: Record<string, number>): FailureCategoryShare[] => {
    const table: [FailureCategoryShare['category'], string, FailureCategoryShare['reasons'][number]['code'][]][] = [
      ['corrupted_file', 'Corrupted file', ['file_validation_failed']],
      ['disk_space', 'Disk space', ['insufficient_disk_space']],
      ['codec_issues', 'Codec issues', ['unsupported_codec', 'unsupported_stream', 'unsupported_container']],
      ['transcoder_errors', 'Transcoder errors', ['transcoder_crashed', 'out_of_memory']],
      ['permission', 'Permission', ['permission_denied']],
      ['timeout', 'Timeout', ['timeout']],
      ['other', 'Other', ['miscellaneous']],
    ];
    const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
    return table.map(([category, label, codes]) => {
      const reasons = codes.map((code) => ({ code, reason: code.replaceAll('_', ' '), count: counts[code] ?? 0 }));
      const count = reasons.reduce((sum, r) => sum + r.count, 0);
      return { category, label, count, share: total > 0 ? count / total : 0, reasons };
    });
  };

  it('lays the categories with failures end to end, as wide as their part, in their own colour', () => {
    const chart = failureChart(
      categories({ file_validation_failed: 1, unsupported_codec: 1, unsupported_stream: 2, miscellaneous: 2 }),
      box,
    );
    expect(chart.total).toBe(6);
    expect(chart.segments.map((s) => [s.category, s.count, s.colour, s.x, s.width])).toEqual([
      ['corrupted_file', 1, 0, 10, 16.67],
      ['codec_issues', 3, 2, 26.67, 50],
      ['other', 2, 6, 76.67, 33.33],
    ]);
    expect(chart.segments.every((s) => s.y === 5 && s.height === 60)).toBe(true);
    // No gap between segments; the last ends at the plot's right edge.
    const ends = chart.segments.map((s) => Math.round((s.x + s.width) * 100) / 100);
    expect(ends).toEqual([26.67, 76.67, 110]);
    expect(chart.segments[1].share).toBe(0.5);
  });

  it('lists under each category its reasons that failed jobs, most first', () => {
    const chart = failureChart(
      categories({ unsupported_codec: 1, unsupported_stream: 2, transcoder_crashed: 1, out_of_memory: 1 }),
      box,
    );
    expect(chart.segments.map((s) => [s.category, s.reasons.map((r) => `${r.reason} ${r.count}`)])).toEqual([
      ['codec_issues', ['unsupported stream 2', 'unsupported codec 1']],
      // A tie keeps the server's order.
      ['transcoder_errors', ['transcoder crashed 1', 'out of memory 1']],
    ]);
  });

  it('draws nothing when nothing failed', () => {
    expect(failureChart(categories({}), box)).toMatchObject({ total: 0, segments: [] });
    expect(failureChart([], box)).toMatchObject({ total: 0, segments: [] });
  });
});
