// Geometry of the inline SVG charts, kept apart from rendering so it can be tested.
import type { FailureCategoryShare, SavingsDay } from './types';

export interface Padding {
  top: number;
  right: number;
  bottom: number;
  left: number;
}

export interface ChartBox {
  width: number;
  height: number;
  padding: Padding;
}

export const SAVINGS_BOX: ChartBox = {
  width: 640,
  height: 240,
  padding: { top: 12, right: 12, bottom: 28, left: 12 },
};

export interface SavingsBar {
  date: string;
  savedBytes: number;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface SavingsPoint {
  date: string;
  cumulativeBytes: number;
  x: number;
  y: number;
}

export interface SavingsChart {
  box: ChartBox;
  /** Daily savings as bars, on their own scale (0 .. maxDaily). */
  bars: SavingsBar[];
  /** Cumulative savings as a line, on its own scale (0 .. maxCumulative). */
  points: SavingsPoint[];
  /** SVG path data through the points ("" without points). */
  linePath: string;
  maxDaily: number;
  maxCumulative: number;
  /** y of the zero line. */
  baseline: number;
}

const round = (value: number) => Math.round(value * 100) / 100;

/**
 * One slot per day across the plot width: a bar centred in its slot (70 % of it) and a
 * line point at the slot's centre. Negative values (a day whose outputs grew) sit on the
 * baseline; an all-zero series stays flat on the baseline.
 */
export function savingsChart(days: SavingsDay[], box: ChartBox = SAVINGS_BOX): SavingsChart {
  const { width, height, padding } = box;
  const plotWidth = Math.max(0, width - padding.left - padding.right);
  const plotHeight = Math.max(0, height - padding.top - padding.bottom);
  const baseline = padding.top + plotHeight;
  const maxDaily = Math.max(0, ...days.map((day) => day.savedBytes));
  const maxCumulative = Math.max(0, ...days.map((day) => day.cumulativeBytes));
  const slot = days.length > 0 ? plotWidth / days.length : 0;
  const barWidth = slot * 0.7;
  const scale = (value: number, max: number) => (max > 0 ? (Math.max(0, value) / max) * plotHeight : 0);

  const bars = days.map((day, i) => {
    const barHeight = scale(day.savedBytes, maxDaily);
    return {
      date: day.date,
      savedBytes: day.savedBytes,
      x: round(padding.left + i * slot + (slot - barWidth) / 2),
      y: round(baseline - barHeight),
      width: round(barWidth),
      height: round(barHeight),
    };
  });
  const points = days.map((day, i) => ({
    date: day.date,
    cumulativeBytes: day.cumulativeBytes,
    x: round(padding.left + i * slot + slot / 2),
    y: round(baseline - scale(day.cumulativeBytes, maxCumulative)),
  }));
  const linePath = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${p.x} ${p.y}`).join(' ');
  return { box, bars, points, linePath, maxDaily, maxCumulative, baseline: round(baseline) };
}

/** A polyline path for a small trend chart; values are plotted between min(0, ...) and max(100, ...). */
export function sparklinePath(values: number[], width: number, height: number, max = 100): string {
  if (values.length === 0) return '';
  const top = Math.max(max, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  return values
    .map((value, i) => {
      const x = values.length > 1 ? i * step : width / 2;
      const y = height - (Math.max(0, value) / top) * height;
      return `${i === 0 ? 'M' : 'L'}${round(x)} ${round(y)}`;
    })
    .join(' ');
}

/** The failures chart: one bar across the card, a segment per category. */
export const FAILURES_BOX: ChartBox = {
  width: 640,
  height: 24,
  padding: { top: 0, right: 0, bottom: 0, left: 0 },
};

export interface FailureReasonRow {
  code: string;
  reason: string;
  count: number;
}

export interface FailureSegment {
  category: string;
  label: string;
  count: number;
  /** 0 to 1, as the server computed it. */
  share: number;
  /** The category's place in the server's fixed order: its colour, kept whichever others failed. */
  colour: number;
  x: number;
  y: number;
  width: number;
  height: number;
  /** The category's reasons that failed jobs, most first (ties in the server's order). */
  reasons: FailureReasonRow[];
}

export interface FailureChart {
  box: ChartBox;
  /** Categories with at least one failure, in the server's order, left to right. */
  segments: FailureSegment[];
  total: number;
}

/**
 * A segment per category that has failures, as wide as its part of the failures, placed
 * end to end across the plot: each edge is rounded once, so the segments meet without gaps
 * and the last ends at the plot's right edge. Nothing failed: no segment.
 */
export function failureChart(categories: FailureCategoryShare[], box: ChartBox = FAILURES_BOX): FailureChart {
  const { width, height, padding } = box;
  const plotWidth = Math.max(0, width - padding.left - padding.right);
  const plotHeight = Math.max(0, height - padding.top - padding.bottom);
  const total = categories.reduce((sum, category) => sum + category.count, 0);
  const edge = (upTo: number) => round(padding.left + (total > 0 ? (upTo / total) * plotWidth : 0));
  let before = 0;
  const segments: FailureSegment[] = [];
  categories.forEach((category, colour) => {
    if (category.count <= 0) return;
    const x = edge(before);
    before += category.count;
    const reasons = category.reasons
      .filter((row) => row.count > 0)
      .map((row) => ({ code: row.code, reason: row.reason, count: row.count }))
      .sort((a, b) => b.count - a.count);
    segments.push({
      category: category.category,
      label: category.label,
      count: category.count,
      share: category.share,
      colour,
      x,
      y: padding.top,
      width: round(edge(before) - x),
      height: plotHeight,
      reasons,
    });
  });
  return { box, segments, total };
}
