import { describe, expect, it } from 'vitest';
import { cpuOf, formatMs, phaseLabel, timesOf } from '../src/phases';
import type { JobEvent } from '../src/types';

const event = (id: number, kind: string, detail: unknown): JobEvent => ({
  id,
  at: '2024-05-01T10:00:00Z',
  kind,
  fromStatus: null,
  toStatus: null,
  nodeName: null,
  detail,
});

describe('timesOf', () => {
  it("reads the phases of the job's last completion, in order", () => {
    const first = event(1, 'completed', { phases: [{ phase: 'video', wallMs: 9000, cpuMs: 17_000 }], aloneMs: 10 });
    const again = event(3, 'completed', {
      phases: [
        { phase: 'validation', wallMs: 1020, cpuMs: 1670 },
        { phase: 'video', wallMs: 17_940, cpuMs: 34_650 },
      ],
      aloneMs: 240,
    });
    const times = timesOf([first, event(2, 'queued', null), again]);
    expect(times?.phases.map((p) => p.phase)).toEqual(['validation', 'video']);
    expect(times?.aloneMs).toBe(240);
  });

  it('has none for a job not completed, or completed by a server that did not record them', () => {
    expect(timesOf([])).toBeNull();
    expect(timesOf([event(1, 'failed', { phases: [{ phase: 'video', wallMs: 1, cpuMs: 1 }] })])).toBeNull();
    expect(timesOf([event(1, 'completed', { outputSize: 5 })])).toBeNull();
    expect(timesOf([event(1, 'completed', null)])).toBeNull();
    expect(timesOf([event(1, 'completed', { phases: 'video' })])).toBeNull();
  });

  it('leaves out entries that are not phases', () => {
    const detail = {
      phases: [
        { phase: 'mux', wallMs: 60, cpuMs: 50 },
        { phase: 'video', wallMs: -1, cpuMs: 3 },
        { phase: 7, wallMs: 1, cpuMs: 1 },
        { phase: 'upload', wallMs: 5, cpuMs: 0, node: 3 },
        null,
      ],
      aloneMs: 'soon',
    };
    expect(timesOf([event(1, 'completed', detail)])).toEqual({
      phases: [{ phase: 'mux', wallMs: 60, cpuMs: 50 }],
      aloneMs: null,
    });
  });
});

describe('phase figures', () => {
  it('shows short phases to the hundredth of a second and long ones as a duration', () => {
    expect(formatMs(0)).toBe('0.00 s');
    expect(formatMs(1020)).toBe('1.02 s');
    expect(formatMs(59_994)).toBe('59.99 s');
    expect(formatMs(61_500)).toBe('1m 02s');
    expect(formatMs(null)).toBe('—');
  });

  it("dashes a transfer's CPU time, which nobody measures, and names the phases", () => {
    expect(cpuOf({ phase: 'download', wallMs: 800, cpuMs: 0 })).toBe('—');
    expect(cpuOf({ phase: 'replace', wallMs: 10, cpuMs: 0 })).toBe('0.00 s');
    expect(phaseLabel('spans')).toBe('Span cuts');
    expect(phaseLabel('verification')).toBe('Verification');
  });
});
