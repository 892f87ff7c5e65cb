// A library's health (issue 38) from the dashboard against the real server: a library of its
// own with a good clip and a copy of it cut in half, both made here with ffmpeg; a quick check
// started from the library's Health panel, followed to its end; the cut file listed with the
// error the server found, no new copy offered (no Sonarr or Radarr holds it); Ignore moves it
// to the ignored findings, and back; checked again, the outcome beside it. Then the same
// panel at phone size. The library is removed
// at the end; its folder goes with the suite's temporary directory.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { DESKTOP, PHONE, apiGet, clipsDir, expectNoSidewaysScroll, goTo, screenshot, shareSession, until, type Session } from './support';

const HEALTH_LIBRARY = 'Health clips';
const GOOD = 'good.mkv';
const CUT = 'cut.mkv';
/** Beside the suite's clips, in its temporary directory (never inside the server's DATA_DIR). */
const folder = join(dirname(clipsDir), 'health');

interface FileHealth {
  id: number;
  path: string;
  verdict: string;
  message: string | null;
  ignored: boolean;
}

interface LibraryHealth {
  run: { status: string } | null;
  files: FileHealth[];
}

/** A good clip and a copy of it cut in half (its packets end mid-file), made once. */
function makeClips(): void {
  if (existsSync(join(folder, CUT))) return;
  mkdirSync(folder, { recursive: true });
  const whole = join(folder, 'whole.mkv');
  const made = spawnSync(
    'ffmpeg',
    ['-nostdin', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=320x240:rate=25', '-t', '4',
      '-c:v', 'libx264', '-preset', 'ultrafast', whole],
    { encoding: 'utf8' },
  );
  if (made.status !== 0) throw new Error(`ffmpeg failed: ${made.stderr}`);
  const bytes = readFileSync(whole);
  writeFileSync(join(folder, GOOD), bytes);
  writeFileSync(join(folder, CUT), bytes.subarray(0, Math.floor(bytes.length / 2)));
  rmSync(whole);
}

/** The library's id, made (not watched, never scanned: no jobs) when missing. */
async function healthLibrary(page: Page): Promise<number> {
  makeClips();
  const found = (await apiGet<{ id: number; name: string }[]>(page, '/libraries')).find((library) => library.name === HEALTH_LIBRARY);
  if (found) return found.id;
  return page.evaluate(
    async ({ name, path }) => {
      const headers = { Authorization: `Bearer ${localStorage.getItem('token') ?? ''}`, 'Content-Type': 'application/json' };
      const body = JSON.stringify({ name, paths: [path], encoder: 'libx265', quality: 30, preset: 'ultrafast', watch: false });
      const created = await fetch('/api/libraries', { method: 'POST', headers, body });
      if (!created.ok) throw new Error(`create library: ${created.status} ${await created.text()}`);
      return ((await created.json()) as { id: number }).id;
    },
    { name: HEALTH_LIBRARY, path: folder },
  );
}

async function removeLibrary(page: Page): Promise<void> {
  const id = await healthLibrary(page);
  await page.evaluate(async (libraryId) => {
    await fetch(`/api/libraries/${libraryId}`, { method: 'DELETE', headers: { Authorization: `Bearer ${localStorage.getItem('token') ?? ''}` } });
  }, id);
}

/** The library's Health panel, opened from its card. */
async function openHealth(page: Page): Promise<Locator> {
  await goTo(page, 'Libraries');
  const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: HEALTH_LIBRARY, exact: true }) });
  await card.getByRole('button', { name: 'Health', exact: true }).click();
  const panel = page.getByRole('region', { name: `Health of ${HEALTH_LIBRARY}` });
  await panel.waitFor();
  return panel;
}

function findingRow(table: Locator, name: string): Locator {
  return table.getByRole('row').filter({ hasText: name });
}

describe("a library's health", () => {
  let session: Session;
  let page: Page;
  let libraryId = 0;
  // Checks wait for idle slots: in a full run the earlier files' jobs have finished; run
  // alone, there are none.
  shareSession({ viewport: DESKTOP, signIn: true }, (opened) => {
    session = opened;
    page = opened.page;
  });

  it('starts a quick check from the dashboard and lists the cut file with its error', async () => {
    libraryId = await healthLibrary(page);
    const panel = await openHealth(page);
    const status = panel.getByRole('status', { name: 'Last health check' });
    const form = panel.getByRole('form', { name: `Check the health of ${HEALTH_LIBRARY}` });
    await form.getByLabel('Depth').selectOption('quick');
    await form.getByRole('button', { name: 'Start check' }).click();
    // Polled every 2 s while it runs: it ends with both files read.
    await until('the check to end', () => status.innerText(), (text) => /Quick check of 2 files finished/.test(text), 90_000);
    expect(await panel.getByLabel('Files by verdict').innerText()).toMatch(/Ok\s+1\b/);

    const health = await apiGet<LibraryHealth>(page, `/libraries/${libraryId}/health`);
    const cut = health.files.find((file) => file.path.endsWith(`/${CUT}`));
    const good = health.files.find((file) => file.path.endsWith(`/${GOOD}`));
    expect(good?.verdict).toBe('ok');
    expect(['damaged', 'unreadable']).toContain(cut?.verdict);
    expect(cut?.message).toBeTruthy();

    const findings = panel.getByRole('table', { name: 'Damaged and unreadable files' });
    const row = findingRow(findings, CUT);
    await row.waitFor();
    const text = await row.innerText();
    expect(text).toContain(cut!.message!);
    expect(text).toMatch(cut!.verdict === 'damaged' ? /Damaged/ : /Unreadable/);
    expect(await findingRow(findings, GOOD).count()).toBe(0);
    // No Sonarr or Radarr connection could hold it: no new copy is offered.
    expect(await row.getByRole('button', { name: `Get a new copy of ${CUT}` }).count()).toBe(0);
    await screenshot(page, 'health-desktop');
  });

  it('ignores the cut file: it moves to the ignored findings, and back', async () => {
    const panel = page.getByRole('region', { name: `Health of ${HEALTH_LIBRARY}` });
    const findings = panel.getByRole('table', { name: 'Damaged and unreadable files' });
    await findingRow(findings, CUT).getByRole('button', { name: `Ignore ${CUT}` }).click();
    const ignored = panel.getByRole('table', { name: 'Ignored findings' });
    await findingRow(ignored, CUT).waitFor();
    expect(await findings.count()).toBe(0);
    await panel.getByText(`Ignored ${CUT}: it may be encoded again.`).waitFor();
    const stored = await apiGet<LibraryHealth>(page, `/libraries/${libraryId}/health`);
    expect(stored.files.find((file) => file.path.endsWith(`/${CUT}`))?.ignored).toBe(true);
    await screenshot(page, 'health-ignored-desktop');

    await findingRow(ignored, CUT).getByRole('button', { name: `Stop ignoring ${CUT}` }).click();
    await findingRow(findings, CUT).waitFor();
    expect(await ignored.count()).toBe(0);
    const back = await apiGet<LibraryHealth>(page, `/libraries/${libraryId}/health`);
    expect(back.files.find((file) => file.path.endsWith(`/${CUT}`))?.ignored).toBe(false);
    expect(session.pageErrors).toEqual([]);
  });

  it('checks the cut file again: the outcome shows beside it once the server has read it', async () => {
    const panel = page.getByRole('region', { name: `Health of ${HEALTH_LIBRARY}` });
    const row = findingRow(panel.getByRole('table', { name: 'Damaged and unreadable files' }), CUT);
    await row.getByRole('button', { name: `Check ${CUT} again` }).click();
    const result = row.getByRole('status', { name: `Result for ${CUT}` });
    await until('the outcome of the check', () => result.innerText(), (text) => /^Checked again: still (damaged|unreadable)\.$/.test(text), 60_000);
    expect(session.pageErrors).toEqual([]);
  });
});

describe("a library's health at phone size", () => {
  let session: Session;
  let page: Page;
  shareSession({ viewport: PHONE, signIn: true, cleanUp: removeLibrary }, (opened) => {
    session = opened;
    page = opened.page;
  });

  it('shows the findings inside the screen', async () => {
    const id = await healthLibrary(page);
    // Run alone, this file checks the library here first.
    const before = await apiGet<LibraryHealth>(page, `/libraries/${id}/health`);
    const panel = await openHealth(page);
    if (before.run === null) {
      await panel.getByRole('button', { name: 'Start check' }).click();
    }
    const status = panel.getByRole('status', { name: 'Last health check' });
    await until('the check to end', () => status.innerText(), (text) => /finished/.test(text), 90_000);
    const row = findingRow(panel.getByRole('table', { name: 'Damaged and unreadable files' }), CUT);
    await row.getByRole('button', { name: `Ignore ${CUT}` }).waitFor();
    await expectNoSidewaysScroll(page);
    await screenshot(page, 'health-phone');
    expect(session.pageErrors).toEqual([]);
  });
});
