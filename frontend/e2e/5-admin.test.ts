// What an administrator manages from the dashboard alone: users and roles, notification
// targets and connections edited in place (secrets write-only), the Sonarr/Radarr path
// mappings, encoding windows painted on the week grid (default and per node), a waiting job's
// priority, the audit log's filters; server refusals shown beside their fields. Then the same
// pages at phone size. Leaves the schedule always open, as it found it.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { DESKTOP, LIBRARY_NAME, PHONE, apiGet, badge, expectNoSidewaysScroll, goTo, jobRow, playableClips, screenshot, shareSession, until, username, type Session } from './support';

const DAYS = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
/** A day two days from now (UTC): a window on it is closed now. */
const LATER_DAY = DAYS[(new Date().getUTCDay() + 6 + 2) % 7];
const FIRST_LIBRARY_PNG = fileURLToPath(new URL('../../docs/images/first-library.png', import.meta.url));

interface ScheduleView {
  timeZone: string;
  windows: { days: string[]; start: string; end: string }[];
  open: boolean;
  followsDefault: boolean;
}

/** Drags across the week grid from one cell to another, as a person paints hours. */
async function drag(grid: Locator, from: string, to: string): Promise<void> {
  const page = grid.page();
  // The pointer only reaches what is on the screen.
  await grid.scrollIntoViewIfNeeded();
  const start = await grid.getByRole('button', { name: from, exact: true }).boundingBox();
  const end = await grid.getByRole('button', { name: to, exact: true }).boundingBox();
  if (!start || !end) throw new Error(`cells ${from} / ${to} are not on screen`);
  await page.mouse.move(start.x + start.width / 2, start.y + start.height / 2);
  await page.mouse.down();
  await page.mouse.move(end.x + end.width / 2, end.y + end.height / 2, { steps: 6 });
  await page.mouse.up();
}

/** The error a field shows beneath it (its aria-describedby), once the server refused it. */
async function fieldError(field: Locator): Promise<string> {
  await until('the field to be marked invalid', () => field.getAttribute('aria-invalid'), (value) => value === 'true', 10_000);
  const id = await field.getAttribute('aria-describedby');
  return (await field.page().locator(`[id="${id}"]`).innerText()).trim();
}

describe('administration from the dashboard', () => {
  let session: Session;
  let page: Page;
  shareSession(
    {
      viewport: DESKTOP,
      signIn: true,
      finishedJobs: true,
      // Whatever failed, later runs find the schedule always open (the closed window would hold every job).
      cleanUp: (opened) =>
        opened.evaluate(async () => {
          const headers = { Authorization: `Bearer ${localStorage.getItem('token') ?? ''}`, 'Content-Type': 'application/json' };
          await fetch('/api/schedule', { method: 'PUT', headers, body: JSON.stringify({ timeZone: 'UTC', windows: [], onClose: 'pause' }) });
        }),
    },
    (opened) => {
      session = opened;
      page = opened.page;
    },
  );

  it('shows the first library on the Libraries page (the README screenshot)', async () => {
    await goTo(page, 'Libraries');
    await page.getByRole('heading', { name: LIBRARY_NAME }).first().waitFor();
    await page.setViewportSize({ width: 1000, height: 640 });
    await screenshot(page, 'first-library');
    // The committed copy is rewritten only on request, so a test run leaves the tree clean.
    if (!existsSync(FIRST_LIBRARY_PNG) || process.env.UPDATE_README_SCREENSHOT === '1') {
      await page.screenshot({ path: FIRST_LIBRARY_PNG });
      expect(statSync(FIRST_LIBRARY_PNG).size).toBeLessThan(200 * 1024);
    }
    await page.setViewportSize(DESKTOP);
  });

  it('adds a user, refuses a short password beside its field, changes the role and password, deletes', async () => {
    await goTo(page, 'Settings');
    const form = page.getByRole('form', { name: 'Add a user' });
    await form.getByLabel(/^Username/).fill('e2e-operator');
    const password = form.getByLabel(/^Password/);
    await password.fill('short');
    await form.getByLabel(/^Role/).selectOption('operator');
    await form.getByRole('button', { name: 'Add user' }).click();
    expect(await fieldError(password)).toMatch(/^password: .*at least/);

    await password.fill('a long enough password');
    await form.getByRole('button', { name: 'Add user' }).click();
    const users = page.getByRole('region', { name: 'Users' });
    await users.getByText('e2e-operator added as operator.').waitFor();
    const role = page.getByLabel('Role of e2e-operator');
    expect(await role.inputValue()).toBe('operator');

    await role.selectOption('viewer');
    await users.getByText('e2e-operator is now viewer; they sign in again.').waitFor();
    expect((await apiGet<{ username: string; role: string }[]>(page, '/users')).find((u) => u.username === 'e2e-operator')?.role).toBe('viewer');

    await page.getByRole('button', { name: 'Set a new password for e2e-operator' }).click();
    const reset = page.getByRole('form', { name: 'New password for e2e-operator' });
    await reset.getByLabel(/^New password/).fill('another long password');
    await reset.getByRole('button', { name: 'Set password' }).click();
    await users.getByText('New password set for e2e-operator.').waitFor();

    await page.getByRole('button', { name: 'Delete e2e-operator' }).click();
    await users.getByText('e2e-operator deleted.').waitFor();
    expect((await apiGet<{ username: string }[]>(page, '/users')).map((u) => u.username)).not.toContain('e2e-operator');
  });

  it('adds a notification target, edits it in place and keeps its secret write-only', async () => {
    const section = page.getByRole('region', { name: 'Notifications' });
    const add = section.getByRole('form', { name: 'Add a target' });
    await add.getByLabel(/^Name/).fill('e2e hook');
    const url = add.getByLabel(/^URL/);
    await url.fill('ftp://127.0.0.1/hook');
    await add.getByRole('button', { name: 'Add target' }).click();
    expect(await fieldError(url)).toMatch(/URL starts with http:\/\/ or https:\/\//);
    await url.fill('http://127.0.0.1:9/hook');
    await add.getByRole('button', { name: 'Add target' }).click();
    await section.getByText('“e2e hook” added.').waitFor();
    const row = section.getByRole('row').filter({ hasText: 'e2e hook' });
    await row.getByRole('cell', { name: 'Not set' }).waitFor();

    await section.getByRole('button', { name: 'Edit e2e hook' }).click();
    let edit = section.getByRole('form', { name: 'Edit e2e hook' });
    await edit.getByLabel(/^Secret/).fill('signing-key');
    await edit.getByRole('button', { name: 'Save' }).click();
    await section.getByText('“e2e hook” saved.').waitFor();
    await row.getByRole('cell', { name: 'Set', exact: true }).waitFor();
    await screenshot(page, 'settings-notifications-desktop');

    // A second edit without the secret keeps it: the secret is never sent back to the page.
    await section.getByRole('button', { name: 'Edit e2e hook' }).click();
    edit = section.getByRole('form', { name: 'Edit e2e hook' });
    expect(await edit.getByLabel(/^Secret/).inputValue()).toBe('');
    await edit.getByLabel(/^Name/).fill('e2e hook 2');
    await edit.getByRole('checkbox', { name: 'Queue drained' }).check();
    await edit.getByRole('button', { name: 'Save' }).click();
    await section.getByText('“e2e hook 2” saved.').waitFor();
    const targets = await apiGet<{ name: string; hasSecret: boolean; events: string[] }[]>(page, '/notifications');
    const target = targets.find((t) => t.name === 'e2e hook 2');
    expect(target?.hasSecret).toBe(true);
    expect(target?.events).toContain('queue.drained');

    await section.getByRole('button', { name: 'Remove e2e hook 2' }).click();
    await until('the target to be removed', async () => (await apiGet<{ name: string }[]>(page, '/notifications')).length, (n) => n === 0, 10_000);
  });

  it('adds a connection with a path mapping and edits the mapping in place, keeping its key', async () => {
    const section = page.getByRole('region', { name: 'Connections' });
    const add = section.getByRole('form', { name: 'Add a connection' });
    await add.getByLabel(/^Name/).fill('e2e plex');
    await add.getByLabel(/^URL/).fill('http://127.0.0.1:9');
    await add.getByLabel(/^API key/).fill('plex-token');
    await add.getByLabel(/^Folder as condense sees it/).fill('/media');
    await add.getByLabel(/^Same folder as the product sees it/).fill('/data');
    await add.getByRole('button', { name: 'Add connection' }).click();
    await section.getByText('“e2e plex” added.').waitFor();
    const row = section.getByRole('row').filter({ hasText: 'e2e plex' });
    await row.getByText('/media → /data').waitFor();

    await section.getByRole('button', { name: 'Edit e2e plex' }).click();
    const edit = section.getByRole('form', { name: 'Edit e2e plex' });
    await edit.getByLabel(/^Same folder as the product sees it/).fill('relative');
    await edit.getByRole('button', { name: 'Save' }).click();
    await edit.getByText(/pathMappings\[0\]: from and to must be absolute folders/).waitFor();
    await edit.getByLabel(/^Same folder as the product sees it/).fill('/plex');
    await edit.getByRole('button', { name: 'Save' }).click();
    await section.getByText('“e2e plex” saved.').waitFor();
    await row.getByText('/media → /plex').waitFor();
    const connections = await apiGet<{ name: string; hasApiKey: boolean }[]>(page, '/connections');
    expect(connections.find((c) => c.name === 'e2e plex')?.hasApiKey).toBe(true);

    await section.getByRole('button', { name: 'Remove e2e plex' }).click();
    await until('the connection to be removed', async () => (await apiGet<unknown[]>(page, '/connections')).length, (n) => n === 0, 10_000);
  });

  it('saves the Sonarr and Radarr path mappings, refusing a relative folder beside it', async () => {
    const form = page.getByRole('form', { name: 'Sonarr and Radarr path mappings' });
    const from = form.getByLabel(/^Folder as Sonarr or Radarr sees it/);
    await from.fill('tv');
    await form.getByLabel(/^Same folder as condense sees it/).fill('/media/tv');
    await form.getByRole('button', { name: 'Save mappings' }).click();
    await until('the row to be marked invalid', () => from.getAttribute('aria-invalid'), (value) => value === 'true', 10_000);
    await form.getByText(/pathMappings\[0\]: from and to must be absolute folders/).waitFor();
    await from.fill('/tv');
    await form.getByRole('button', { name: 'Save mappings' }).click();
    await form.getByText('Path mappings saved.').waitFor();
    expect(await apiGet(page, '/settings/arr')).toEqual({ pathMappings: [{ from: '/tv', to: '/media/tv' }] });
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
    await until('the saved mapping after a reload', () => page.getByLabel(/^Folder as Sonarr or Radarr sees it/).inputValue(), (v) => v === '/tv', 10_000);
  });

  it("paints the default schedule's hours by dragging, and a closed window holds a job whose priority is raised", async () => {
    const grid = page.getByRole('group', { name: 'Default schedule: hours open for encoding' });
    await drag(grid, `${LATER_DAY} 01:00`, `${LATER_DAY} 03:00`);
    const form = page.getByRole('form', { name: 'Default schedule' });
    await form.getByText(`3 hours a week: ${LATER_DAY} 01:00–04:00.`).waitFor();
    await form.getByRole('button', { name: 'Save schedule' }).click();
    await form.getByText('Schedule saved.').waitFor();
    await form.getByText('Closed now').waitFor();
    const schedule = await apiGet<ScheduleView>(page, '/schedule');
    expect(schedule.windows).toEqual([{ days: [LATER_DAY.toLowerCase()], start: '01:00', end: '04:00' }]);
    expect(schedule.open).toBe(false);

    // A new file while the window is closed waits in the queue: its priority can be changed.
    const dir = mkdtempSync(join(tmpdir(), 'condense-e2e-later-'));
    // A fresh H.264 clip (the suite's own clips are HEVC by now: they were replaced).
    const made = spawnSync('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=160x120:rate=25', '-t', '2', '-c:v', 'libx264', '-preset', 'ultrafast', join(dir, 'later.mkv')]);
    expect(made.status, String(made.stderr)).toBe(0);
    // A file modified a moment ago may still be being written: a scan defers it. This one is old.
    const past = new Date(Date.now() - 3_600_000);
    utimesSync(join(dir, 'later.mkv'), past, past);
    await page.evaluate(async (path) => {
      const headers = { Authorization: `Bearer ${localStorage.getItem('token') ?? ''}`, 'Content-Type': 'application/json' };
      const body = JSON.stringify({ name: 'Later', paths: [path], encoder: 'libx265', quality: 30, preset: 'ultrafast' });
      const created = await fetch('/api/libraries', { method: 'POST', headers, body });
      if (!created.ok) throw new Error(`create library: ${created.status} ${await created.text()}`);
      const { id } = (await created.json()) as { id: number };
      const scanned = await fetch(`/api/libraries/${id}/scan`, { method: 'POST', headers, body: '{}' });
      if (!scanned.ok) throw new Error(`scan: ${scanned.status} ${await scanned.text()}`);
    }, dir);

    await goTo(page, 'Jobs');
    const row = jobRow(page, 'later.mkv');
    await row.getByRole('button', { name: 'Raise the priority of later.mkv' }).click();
    await until('the raised priority', async () => (await row.getByRole('group', { name: 'Priority of later.mkv' }).innerText()).trim(), (v) => v.startsWith('1'), 10_000);
    // Finished jobs show their priority, with nothing to change.
    expect(await jobRow(page, playableClips[0]).getByRole('button', { name: /priority of/ }).count()).toBe(0);
    await screenshot(page, 'jobs-priority-desktop');

    await row.getByRole('link', { name: 'later.mkv' }).click();
    await page.getByRole('button', { name: 'Lower the priority of later.mkv' }).click();
    await page.getByText('Priority 0').waitFor();
    const jobs = await apiGet<{ items: { fileName: string; priority: number; status: string }[] }>(page, '/jobs?pageSize=500');
    const later = jobs.items.find((job) => job.fileName === 'later.mkv');
    expect(later?.priority).toBe(0);
    expect(['PENDING', 'QUEUED', 'ANALYZING']).toContain(later?.status);
    await page.getByRole('button', { name: 'Cancel later.mkv' }).click();
    await badge(page.getByRole('region', { name: 'Job facts' }), 'Cancelled').waitFor();

    // Back to always open, as the suite found it.
    await goTo(page, 'Settings');
    const again = page.getByRole('form', { name: 'Default schedule' });
    await again.getByRole('button', { name: 'Clear the grid' }).click();
    await again.getByText('Nothing painted: always open.').waitFor();
    await again.getByRole('button', { name: 'Save schedule' }).click();
    await again.getByText('Open now').waitFor();
    expect((await apiGet<ScheduleView>(page, '/schedule')).windows).toEqual([]);
  });

  it("gives a node its own schedule on the Nodes page, then makes it follow the default again", async () => {
    await goTo(page, 'Nodes');
    const open = page.getByRole('button', { name: /^Edit the schedule of / });
    const name = ((await open.first().getAttribute('aria-label')) ?? '').replace('Edit the schedule of ', '');
    await open.first().click();
    const form = page.getByRole('form', { name: `Schedule of ${name}` });
    await form.getByText('Follows the default schedule.').waitFor();
    await drag(form.getByRole('group'), 'Sat 20:00', 'Sun 23:00');
    await form.getByText('8 hours a week: Sat, Sun 20:00–24:00.').waitFor();
    await form.getByLabel(/^Time zone/).fill('Mars/Olympus');
    await form.getByRole('button', { name: 'Save schedule' }).click();
    expect(await fieldError(form.getByLabel(/^Time zone/))).toMatch(/is not an IANA time zone name/);
    await form.getByLabel(/^Time zone/).fill('Europe/Berlin');
    await form.getByRole('button', { name: 'Save schedule' }).click();
    await form.getByText('Schedule saved.').waitFor();
    const nodes = await apiGet<{ id: number; name: string }[]>(page, '/nodes');
    const id = nodes.find((node) => node.name === name)?.id;
    const own = await apiGet<ScheduleView>(page, `/nodes/${id}/schedule`);
    expect(own).toMatchObject({ timeZone: 'Europe/Berlin', followsDefault: false, windows: [{ days: ['sat', 'sun'], start: '20:00', end: '24:00' }] });
    await screenshot(page, 'nodes-schedule-desktop');

    await form.getByRole('button', { name: 'Follow the default' }).click();
    await form.getByText('It follows the default schedule now.').waitFor();
    expect((await apiGet<ScheduleView>(page, `/nodes/${id}/schedule`)).followsDefault).toBe(true);
  });

  it('filters the audit log by user, key and action', async () => {
    await goTo(page, 'Settings');
    const audit = page.getByRole('region', { name: 'Audit log' });
    const filters = audit.getByRole('search', { name: 'Filter the audit log' });
    await filters.getByRole('textbox', { name: 'User' }).fill(username);
    await filters.getByRole('button', { name: 'Filter' }).click();
    await filters.getByRole('combobox', { name: 'Action' }).selectOption('PUT /schedule');
    await filters.getByRole('combobox', { name: 'API key' }).selectOption('none');
    const rows = audit.getByRole('row').filter({ has: page.getByRole('cell') });
    await until('only the schedule changes', async () => rows.allInnerTexts(), (texts) => texts.length >= 2 && texts.every((t) => t.includes('PUT /api/schedule')), 10_000);
    await filters.getByRole('textbox', { name: 'User' }).fill('nobody-here');
    await filters.getByRole('button', { name: 'Filter' }).click();
    await audit.getByText(/Nothing has been changed yet|No entry matches the filters/).waitFor();
    await filters.getByRole('textbox', { name: 'User' }).fill('');
    await filters.getByRole('button', { name: 'Filter' }).click();
    await filters.getByRole('combobox', { name: 'Action' }).selectOption('');
    await rows.first().waitFor();
    await screenshot(page, 'settings-desktop');
    expect(session.pageErrors).toEqual([]);
  });
});

describe('administration on a phone', () => {
  let session: Session;
  let page: Page;
  shareSession({ viewport: PHONE, signIn: true }, (opened) => {
    session = opened;
    page = opened.page;
  });

  it('shows every settings section inside the screen, and edits a target in place', async () => {
    await goTo(page, 'Settings');
    for (const name of ['Users', 'API keys', 'Encoding windows', 'Notifications', 'Connections', 'Sonarr and Radarr path mappings', 'Audit log']) {
      await page.getByRole('region', { name, exact: true }).waitFor();
    }
    const section = page.getByRole('region', { name: 'Notifications' });
    const add = section.getByRole('form', { name: 'Add a target' });
    await add.getByLabel(/^Name/).fill('phone hook');
    await add.getByLabel(/^URL/).fill('http://127.0.0.1:9/phone');
    await add.getByRole('button', { name: 'Add target' }).click();
    await section.getByText('“phone hook” added.').waitFor();
    await section.getByRole('button', { name: 'Edit phone hook' }).click();
    const edit = section.getByRole('form', { name: 'Edit phone hook' });
    await edit.getByLabel(/^URL/).fill('http://127.0.0.1:9/phone2');
    await expectNoSidewaysScroll(page);
    await screenshot(page, 'settings-phone');
    await edit.getByRole('button', { name: 'Save' }).click();
    await section.getByText('“phone hook” saved.').waitFor();
    await section.getByRole('button', { name: 'Remove phone hook' }).click();
    await until('the target to be removed', async () => (await apiGet<unknown[]>(page, '/notifications')).length, (n) => n === 0, 10_000);
    await expectNoSidewaysScroll(page);
  });

  it("paints a node's week grid inside the screen, and shows jobs with their priority", async () => {
    await goTo(page, 'Nodes');
    await page.getByRole('button', { name: /^Edit the schedule of / }).first().click();
    const grid = page.getByRole('group', { name: /^Schedule of .*: hours open for encoding$/ });
    await grid.waitFor();
    const box = await grid.boundingBox();
    expect(box && box.x + box.width).toBeLessThanOrEqual(PHONE.width);
    await page.getByRole('button', { name: 'Clear the grid' }).click();
    await drag(grid, 'Mon 08:00', 'Tue 10:00');
    await page.getByText('6 hours a week: Mon, Tue 08:00–11:00.').waitFor();
    await expectNoSidewaysScroll(page);
    await screenshot(page, 'nodes-schedule-phone');

    await goTo(page, 'Jobs');
    await jobRow(page, playableClips[0]).waitFor();
    await expectNoSidewaysScroll(page);
    await screenshot(page, 'jobs-priority-phone');
    expect(session.pageErrors).toEqual([]);
  });
});
