// The read-mostly pages once real work is done: the overview's panels, the Nodes page with the
// node up (ONLINE, or DEGRADED on a loaded machine) and its encoders, the Insights charts; screenshots of every page at desktop size.
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { DESKTOP, badge, LIBRARY_NAME, brokenClip, goTo, jobRow, playableClips, screenshot, shareSession, until, username, type Session } from './support';

/** The value a description list gives for `term` (e.g. "Completed" in the queue counts). */
async function fact(scope: Locator, term: string): Promise<string> {
  return (await scope.getByRole('term').filter({ hasText: new RegExp(`^${term}$`) }).locator('xpath=following-sibling::dd').innerText()).trim();
}

describe('overview, nodes and insights with real data', () => {
  let session: Session;
  let page: Page;
  shareSession({ viewport: DESKTOP, signIn: true, finishedJobs: true }, (opened) => {
    session = opened;
    page = opened.page;
  });

  it('shows health, queue counts and performance on the overview', async () => {
    await goTo(page, 'Overview');
    const health = page.getByRole('region', { name: 'System health' });
    await health.waitFor();
    expect(await health.getByRole('listitem').count()).toBeGreaterThanOrEqual(4);
    const queue = page.getByRole('region', { name: 'Queue' });
    // The counters follow status changes (re-fetched at most every 2 s), so wait for them.
    await until('the completed count', async () => Number(await fact(queue, 'Completed')), (n) => n >= playableClips.length, 15_000);
    await until('the failed count', async () => Number(await fact(queue, 'Failed')), (n) => n >= 1, 15_000);
    const active = page.getByRole('region', { name: /^Active jobs/ });
    await active.getByText('Nothing is encoding right now.').waitFor();
    expect(await active.innerText()).toMatch(/1 of 1 nodes up/);
    await page.getByRole('status', { name: 'Live updates: connected' }).waitFor();
    expect(await page.getByRole('alert').count()).toBe(0);
    await screenshot(page, 'overview-desktop');
  });

  it('lists the jobs with their outcome', async () => {
    await goTo(page, 'Jobs');
    for (const name of playableClips) await badge(jobRow(page, name), 'Completed').waitFor();
    await jobRow(page, brokenClip).getByText('file validation failed').waitFor();
    await screenshot(page, 'jobs-desktop');

    await jobRow(page, playableClips[0]).getByRole('link', { name: playableClips[0] }).click();
    const facts = page.getByRole('region', { name: 'Job facts' });
    await badge(facts, 'Completed').waitFor();
    expect(await fact(facts, 'Codec')).toBe('h264 → hevc');
    await page.getByRole('region', { name: 'History' }).getByRole('cell', { name: 'Completed', exact: true }).first().waitFor();
    await screenshot(page, 'job-detail-desktop');
  });

  it('shows the node up with its encoders on the Nodes page', async () => {
    await goTo(page, 'Nodes');
    const rows = page.getByRole('row').filter({ has: page.getByRole('cell') });
    await rows.first().waitFor();
    expect(await rows.count()).toBe(1);
    const node = rows.first();
    // Online, or Degraded when the machine running the tests is loaded above 2 per core.
    await badge(node, '(Online|Degraded)').waitFor();
    expect(await node.innerText()).toContain('Main');
    const encoders = node.getByRole('list', { name: /^Encoders of / });
    expect(await encoders.getByRole('listitem').allInnerTexts()).toContain('libx265');
    await page.getByText(/[01] online · 1 total/).waitFor();
    await screenshot(page, 'nodes-desktop');
  });

  it('renders the Insights charts once jobs completed', async () => {
    await goTo(page, 'Insights');
    // Savings trend: an SVG chart with a summary of what it shows.
    const chart = page.getByRole('img', { name: /saved in total/ });
    await chart.waitFor();
    expect(await chart.locator('rect').count()).toBeGreaterThan(0);
    // Codec distribution: the re-encoded clips are HEVC now.
    const codecs = page.getByRole('region', { name: 'Codecs in the libraries' });
    await codecs.getByText('HEVC', { exact: true }).waitFor();
    // Node performance: one row per node that finished jobs.
    const perf = page.getByRole('region', { name: 'Node performance' });
    await perf.getByRole('row').filter({ has: page.getByRole('cell') }).first().waitFor();
    expect(await perf.getByRole('row').filter({ has: page.getByRole('cell') }).count()).toBe(1);
    // Failed jobs name the corrupt file and the reason.
    const failed = page.getByRole('region', { name: 'Failed jobs' });
    await failed.getByRole('link', { name: brokenClip }).waitFor();
    expect(await failed.innerText()).toContain('file validation failed');
    // Failures by category: the corrupt file under its category, its reason beneath, the
    // bar's summary giving the category its share.
    const categories = page.getByRole('region', { name: 'Failures by category, last 30 days' });
    const corrupted = categories.locator('tbody[data-category="corrupted_file"]');
    await corrupted.waitFor();
    expect(await corrupted.innerText()).toContain('Corrupted file');
    expect(await corrupted.innerText()).toContain('file validation failed');
    expect(await categories.getByRole('img').getAttribute('aria-label')).toMatch(/Corrupted file 100/);
    expect(await page.getByRole('alert').count()).toBe(0);
    await screenshot(page, 'insights-desktop');
  });

  it('shows who changed what in the audit log on the Settings page', async () => {
    await goTo(page, 'Settings');
    const audit = page.getByRole('region', { name: 'Audit log' });
    // The suite's library was created through the API (by the jobs file or ensureFinishedJobs).
    const created = audit.getByRole('row').filter({ has: page.getByRole('cell', { name: 'POST /api/libraries', exact: true }) });
    await created.first().waitFor();
    const text = await created.first().innerText();
    expect(text).toContain(username);
    expect(text).toContain('Done');
    await screenshot(page, 'settings-desktop');
    expect(session.pageErrors).toEqual([]);
  });

  it('shows the library on the Libraries page', async () => {
    await goTo(page, 'Libraries');
    await page.getByRole('heading', { level: 2, name: LIBRARY_NAME }).waitFor();
    await screenshot(page, 'libraries-desktop');
    expect(session.pageErrors).toEqual([]);
  });
});
