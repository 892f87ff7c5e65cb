// The main flow, as a person does it: create a library on the Libraries page and scan it, watch
// a job's progress bar rise live and the job complete, pause another from its detail page and
// resume it, and see the corrupt file fail with its reason after its automatic retries.
import type { Page, Request } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { LIBRARY_NAME, badge, brokenClip, clipsDir, goTo, jobRow, playableClips, progressOf, shareSession, until, type Session } from './support';

describe('libraries and jobs', () => {
  let session: Session;
  let page: Page;
  /** The clip whose progress the second test watches; the other one is paused and resumed. */
  let watched: string;
  shareSession({ signIn: true }, (opened) => {
    session = opened;
    page = opened.page;
  });

  it('creates a library through the Libraries page and scans it', async () => {
    await goTo(page, 'Libraries');
    await page.getByRole('button', { name: 'Add library' }).click();
    const form = page.getByRole('form', { name: 'New library' });
    await form.getByRole('textbox', { name: 'Name' }).fill(LIBRARY_NAME);
    await form.getByRole('textbox', { name: 'Media path 1' }).fill(clipsDir);
    await form.getByRole('combobox', { name: 'Target codec' }).selectOption({ label: 'HEVC (H.265)' });
    // The encoders, presets and quality range offered come from /encoders.
    await form.getByRole('combobox', { name: 'Encoder' }).selectOption('libx265');
    await form.getByRole('spinbutton', { name: /^Quality/ }).fill('30');
    await form.getByRole('combobox', { name: 'Preset' }).selectOption('ultrafast');
    await form.getByRole('button', { name: 'Create library' }).click();

    await page.getByText(`Saved library “${LIBRARY_NAME}”.`).waitFor();
    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { level: 2, name: LIBRARY_NAME }) });
    await card.waitFor();
    expect(await card.getByRole('list', { name: `Paths of ${LIBRARY_NAME}` }).textContent()).toContain(clipsDir.split('/').pop());
    const facts = await card.locator('dl').innerText();
    expect(facts).toContain('HEVC');
    expect(facts).toContain('libx265');
    expect(facts).toContain('CRF 30');
    expect(facts).toContain('ultrafast');

    await card.getByRole('button', { name: 'Scan now' }).click();
    await page.getByText(new RegExp(`Scan of “${LIBRARY_NAME}” queued \\d+ files?\\.`)).waitFor();
  });

  it('shows a running job’s progress rising live, on the overview and the jobs page, until it completes', async () => {
    // The overview's active jobs: wait for a clip to start encoding (the one node runs one job
    // at a time on the FREE licence), early enough to watch it.
    await goTo(page, 'Overview');
    await page.getByRole('status', { name: 'Live updates: connected' }).waitFor();
    const active = page.getByRole('region', { name: /^Active jobs/ });
    const bars = () =>
      active.getByRole('progressbar').evaluateAll((elements) =>
        elements.map((element) => ({ label: element.getAttribute('aria-label') ?? '', value: Number(element.getAttribute('aria-valuenow')) })),
      );
    const early = await until(
      'a clip to start encoding on the overview',
      async () => (await bars()).find((bar) => playableClips.some((name) => bar.label === `Progress of ${name}`) && bar.value < 40) ?? null,
      (bar) => bar !== null,
      90_000,
    );
    watched = early!.label.replace(/^Progress of /, '');
    const overviewBar = active.getByRole('progressbar', { name: `Progress of ${watched}` });
    await until(`the overview's progress of ${watched} to rise above ${early!.value}`, () => progressOf(overviewBar), (v) => v !== null && v > early!.value, 30_000);

    // The same job on the jobs page: every job of the scan is listed; the bar keeps rising,
    // pushed over the WebSocket (the page is never reloaded), up to the job's completion.
    await goTo(page, 'Jobs');
    for (const name of [...playableClips, brokenClip]) await jobRow(page, name).waitFor();
    const row = jobRow(page, watched);
    const bar = row.getByRole('progressbar', { name: `Progress of ${watched}` });
    const refetches: string[] = [];
    const countRefetch = (request: Request) => {
      if (new URL(request.url()).pathname === '/api/jobs') refetches.push(request.url());
    };
    page.on('request', countRefetch);
    const first = (await progressOf(bar))!;
    await until(`the progress of ${watched} to rise above ${first}`, () => progressOf(bar), (v) => v !== null && v > first, 30_000);
    await badge(row, 'Completed').waitFor({ timeout: 60_000 });
    page.off('request', countRefetch);
    expect(await progressOf(bar)).toBe(100);
    expect(refetches, 'the list followed the job without fetching it again').toEqual([]);
    expect(await page.getByRole('status', { name: 'Live updates: connected' }).innerText()).toContain('Live');
  });

  it('pauses a running job from its detail page and resumes it to completion', async () => {
    const other = playableClips.find((name) => name !== watched)!;
    await jobRow(page, other).getByRole('link', { name: other }).click();
    await page.getByRole('heading', { level: 1, name: other }).waitFor();
    const facts = page.getByRole('region', { name: 'Job facts' });
    const bar = facts.getByRole('progressbar');

    // Pause while it encodes, once part of it is done, so resuming has something to keep.
    await badge(facts, 'Encoding').waitFor({ timeout: 120_000 });
    await until(`${other} to pass 20 %`, () => progressOf(bar), (v) => v !== null && v >= 20, 60_000);
    await page.getByRole('button', { name: `Pause ${other}` }).click();
    await badge(facts, 'Paused').waitFor();
    const pausedAt = (await progressOf(bar))!;
    expect(pausedAt).toBeLessThan(100);
    // Paused means stopped: a later look shows the same progress and status.
    await page.getByRole('cell', { name: 'Paused' }).first().waitFor();
    expect(await badge(facts, 'Paused').count()).toBe(1);
    expect(await progressOf(bar)).toBe(pausedAt);

    // Resumed, it continues where it stopped (1 s segments: at most the one in progress is
    // encoded again), so the bar never falls back far below the paused value on its way to 100.
    await page.getByRole('button', { name: `Resume ${other}` }).click();
    const after: number[] = [];
    await until(
      `${other} to complete after resuming`,
      async () => {
        after.push((await progressOf(bar)) ?? -1);
        return badge(facts, 'Completed').count();
      },
      (completed) => completed === 1,
      120_000,
    );
    expect(await progressOf(bar)).toBe(100);
    expect(Math.min(...after), `progress after resuming: ${after.join(', ')}`).toBeGreaterThanOrEqual(pausedAt - 15);
    // The history records the pause and the resume.
    const history = page.getByRole('region', { name: 'History' });
    await history.getByRole('cell', { name: 'Resumed', exact: true }).waitFor();
    expect(await history.getByRole('cell', { name: 'Paused', exact: true }).count()).toBeGreaterThan(0);
    // Where the completed job's time went, phase by phase, by the service's own clocks.
    const times = page.getByRole('region', { name: 'Where the time went' });
    await times.getByRole('cell', { name: 'Verification', exact: true }).waitFor();
    expect(await times.getByRole('cell', { name: 'Validation', exact: true }).count()).toBe(1);
    expect(await times.getByRole('cell', { name: 'Video', exact: true }).count()).toBe(1);
  });

  it('shows the corrupt file failed with “file validation failed” after three retries', async () => {
    await goTo(page, 'Jobs');
    await page.getByRole('combobox', { name: 'Status' }).selectOption('FAILED');
    const row = jobRow(page, brokenClip);
    await badge(row, 'Failed').waitFor({ timeout: 150_000 });
    expect(await row.getByText('file validation failed').count()).toBe(1);

    await row.getByRole('link', { name: brokenClip }).click();
    const facts = page.getByRole('region', { name: 'Job facts' });
    await badge(facts, 'Failed').waitFor();
    await facts.getByText('file validation failed').waitFor();
    expect(await facts.getByRole('term').filter({ hasText: 'Retries' }).locator('xpath=following-sibling::dd').innerText()).toBe('3');
    expect(session.pageErrors).toEqual([]);
  });
});
