// A phone-sized viewport (375 x 812): the navigation collapses into a menu that opens and
// works, the jobs list is readable, and no page scrolls sideways. Screenshots of every page.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { PHONE, badge, brokenClip, expectNoSidewaysScroll, goTo, jobRow, mainNav, playableClips, screenshot, shareSession, type Session } from './support';

describe('on a phone', () => {
  let session: Session;
  let page: Page;
  shareSession({ viewport: PHONE, signIn: true, finishedJobs: true }, (opened) => {
    session = opened;
    page = opened.page;
  });

  it('collapses the navigation into a menu that opens and closes', async () => {
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await expectNoSidewaysScroll(page);
    const open = page.getByRole('button', { name: 'Open menu' });
    await open.waitFor();
    expect(await mainNav(page).getByRole('link', { name: 'Jobs' }).isVisible()).toBe(false);
    await open.click();
    expect(await page.getByRole('button', { name: 'Close menu' }).getAttribute('aria-expanded')).toBe('true');
    await mainNav(page).getByRole('link', { name: 'Jobs' }).waitFor();
    await screenshot(page, 'menu-phone');
    await mainNav(page).getByRole('link', { name: 'Jobs' }).click();
    await page.getByRole('heading', { level: 1, name: 'Jobs' }).waitFor();
    // Following a link closes the menu again.
    await page.getByRole('button', { name: 'Open menu' }).waitFor();
  });

  it('shows the jobs list usably, without sideways scrolling', async () => {
    await goTo(page, 'Jobs');
    for (const name of playableClips) {
      const row = jobRow(page, name);
      await badge(row, 'Completed').waitFor();
      // Each job is a card inside the screen, its file name and status readable.
      const box = await row.boundingBox();
      expect(box).not.toBeNull();
      expect(box!.x).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width).toBeLessThanOrEqual(PHONE.width + 1);
      expect(await row.getByRole('link', { name }).isVisible()).toBe(true);
    }
    await jobRow(page, brokenClip).getByText('file validation failed').waitFor();
    await expectNoSidewaysScroll(page);
    await screenshot(page, 'jobs-phone');

    await jobRow(page, playableClips[0]).getByRole('link', { name: playableClips[0] }).click();
    await badge(page.getByRole('region', { name: 'Job facts' }), 'Completed').waitFor();
    await page.getByRole('region', { name: 'History' }).getByRole('cell').first().waitFor();
    await expectNoSidewaysScroll(page);
    await screenshot(page, 'job-detail-phone');
  });

  it.each([
    ['Overview', 'overview-phone'],
    ['Libraries', 'libraries-phone'],
    ['Nodes', 'nodes-phone'],
    ['Insights', 'insights-phone'],
  ])('shows %s without sideways scrolling', async (label, file) => {
    await goTo(page, label);
    // Wait for the page's data, not just its heading.
    await expect.poll(() => page.getByRole('status').filter({ hasText: /^Loading/ }).count(), { timeout: 15_000 }).toBe(0);
    expect(await page.getByRole('alert').count()).toBe(0);
    await expectNoSidewaysScroll(page);
    await screenshot(page, file);
  });

  it('raised no errors in the page', () => {
    expect(session.pageErrors).toEqual([]);
  });
});
