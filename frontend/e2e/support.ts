// Helpers of the browser tests: the browser, signing in, waiting for conditions, screenshots.
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, expect, inject } from 'vitest';

export const uiUrl = inject('uiUrl');
export const clipsDir = inject('clipsDir');
export const username = inject('username');
export const password = inject('password');
const artifactsDir = inject('artifactsDir');
/** The playable clips, then the corrupt file (see global-setup.ts). */
const clipNames = inject('clipNames');
export const playableClips = clipNames.slice(0, -1);
export const brokenClip = clipNames[clipNames.length - 1];
export const LIBRARY_NAME = 'Clips';

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 375, height: 812 };

/** Debian's chromium, headless; never a downloaded browser. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

export interface Session {
  context: BrowserContext;
  page: Page;
  /** Uncaught exceptions in the page: every test file expects none. */
  pageErrors: string[];
}

export async function openSession(browser: Browser, viewport = DESKTOP): Promise<Session> {
  const phone = viewport.width < 500;
  const context = await browser.newContext({ viewport, isMobile: phone, hasTouch: phone, locale: 'en-GB', timezoneId: 'UTC' });
  context.setDefaultTimeout(15_000);
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(`${error.name}: ${error.message}`));
  // The server's Content-Security-Policy (src/http/headers.rs) allows only the dashboard's own
  // origin: anything it blocks (an inline script or style, another host) is a failure too.
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) pageErrors.push(`CSP: ${message.text()}`);
  });
  // Confirmation dialogs (cancel, pause all) are accepted, as a person who means it would.
  page.on('dialog', (dialog) => void dialog.accept());
  return { context, page, pageErrors };
}

/** Signs in through the login form and waits for the dashboard shell. */
export async function signIn(page: Page): Promise<void> {
  await page.goto(`${uiUrl}/#/`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  // The brand link heads the dashboard at every size (on a phone the navigation is folded away).
  await page.getByRole('link', { name: 'condense overview' }).waitFor();
}

export function mainNav(page: Page): Locator {
  return page.getByRole('navigation', { name: 'Main' });
}

/** Follows a link of the main navigation, opening the phone menu first when there is one. */
export async function goTo(page: Page, label: string): Promise<void> {
  const menu = page.getByRole('button', { name: 'Open menu' });
  const folded = await menu.isVisible();
  if (folded) await menu.click();
  await mainNav(page).getByRole('link', { name: label, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: label }).waitFor();
  // Following a link folds the menu away again, also when it leads to the page shown.
  if (folded) await menu.waitFor();
}

/** Polls `condition` until it holds; fails with `what` and the last observed value. */
export async function until<T>(
  what: string,
  probe: () => Promise<T>,
  condition: (value: T) => boolean,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await probe();
    if (condition(last)) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(last)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The table row (or stacked card) of a job in a jobs list. */
export function jobRow(page: Page, fileName: string): Locator {
  return page.getByRole('row').filter({ has: page.getByRole('link', { name: fileName, exact: true }) });
}

/** aria-valuenow of a progress bar, or null when there is none. */
export async function progressOf(bar: Locator): Promise<number | null> {
  if ((await bar.count()) === 0) return null;
  const value = await bar.first().getAttribute('aria-valuenow');
  return value === null ? null : Number(value);
}

/**
 * A status badge showing exactly `status`, title-cased ("Encoding", "Completed"). Badges are
 * found by their class: the same word also appears as plain text (a "Completed" date, a stage).
 */
export function badge(scope: Locator | Page, status: string): Locator {
  return scope.locator('.badge', { hasText: new RegExp(`^${status}$`) });
}

/** The page fits the phone's width: nothing scrolls sideways. */
export async function expectNoSidewaysScroll(page: Page): Promise<void> {
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  expect(width, `the page is ${width} px wide`).toBeLessThanOrEqual(PHONE.width + 1);
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(artifactsDir, `${name}.png`), fullPage: true });
}

/** The API as the signed-in page sees it (same origin, its token): for preconditions, never for the checks. */
export async function apiGet<T>(page: Page, path: string): Promise<T> {
  return page.evaluate(async (url) => {
    const response = await fetch(url, { headers: { Authorization: `Bearer ${localStorage.getItem('token') ?? ''}` } });
    if (!response.ok) throw new Error(`${url}: ${response.status} ${await response.text()}`);
    return response.json();
  }, `/api${path}`) as Promise<T>;
}

interface JobSummary {
  id: number;
  fileName: string;
  status: string;
}

const SETTLED = ['COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED'];

/**
 * Makes sure the server has the suite's library and that its jobs have finished, so a file can
 * also run alone (`npm run e2e -- pages`). In a full run the jobs file already did all this
 * through the UI, and this only checks.
 */
export async function ensureFinishedJobs(page: Page): Promise<void> {
  const libraries = await apiGet<{ id: number; name: string }[]>(page, '/libraries');
  if (!libraries.some((library) => library.name === LIBRARY_NAME)) {
    await page.evaluate(
      async ({ name, path }) => {
        const headers = { Authorization: `Bearer ${localStorage.getItem('token') ?? ''}`, 'Content-Type': 'application/json' };
        const body = JSON.stringify({ name, paths: [path], encoder: 'libx265', quality: 30, preset: 'ultrafast' });
        const created = await fetch('/api/libraries', { method: 'POST', headers, body });
        if (!created.ok) throw new Error(`create library: ${created.status} ${await created.text()}`);
        const { id } = (await created.json()) as { id: number };
        const scanned = await fetch(`/api/libraries/${id}/scan`, { method: 'POST', headers, body: '{}' });
        if (!scanned.ok) throw new Error(`scan: ${scanned.status} ${await scanned.text()}`);
      },
      { name: LIBRARY_NAME, path: clipsDir },
    );
  }
  await until(
    'every job of the suite to finish',
    async () => (await apiGet<{ items: JobSummary[] }>(page, '/jobs?pageSize=500')).items.map((job) => `${job.fileName}:${job.status}`),
    (jobs) => jobs.length >= playableClips.length + 1 && jobs.every((job) => SETTLED.includes(job.split(':')[1])),
    170_000,
  );
}

/**
 * For a file whose tests build on each other: after a failure, save a screenshot of the page
 * (`failure-<test>.png`) and skip the rest of the file instead of timing out test after test.
 */
export function stopAtFirstFailure(page: () => Page | undefined): void {
  let failed = false;
  beforeEach((context) => {
    if (failed) context.skip();
  });
  afterEach(async (context) => {
    if (context.task.result?.state !== 'fail') return;
    failed = true;
    const current = page();
    const name = context.task.name.replace(/[^\w]+/g, '-').slice(0, 60);
    if (current && !current.isClosed()) await screenshot(current, `failure-${name}`).catch(() => {});
  });
}

export interface SharedSessionOptions {
  viewport?: { width: number; height: number };
  /** Sign in through the login form before the first test. */
  signIn?: boolean;
  /** Then make sure the suite's jobs have finished (see ensureFinishedJobs). */
  finishedJobs?: boolean;
  /** Runs before the browser closes, whatever failed; its own failure is ignored. */
  cleanUp?: (page: Page) => Promise<void>;
}

/**
 * The frame of every describe block here: a browser and one session that its tests share,
 * handed to `opened` before the first test (then signed in and waited on as `options` asks),
 * the rest of the block skipped after a failure (stopAtFirstFailure), the browser closed after
 * the last test.
 */
export function shareSession(options: SharedSessionOptions, opened: (session: Session) => void): void {
  let browser: Browser | undefined;
  let session: Session | undefined;
  beforeAll(async () => {
    browser = await launchBrowser();
    session = await openSession(browser, options.viewport);
    opened(session);
    if (options.signIn) await signIn(session.page);
    if (options.finishedJobs) await ensureFinishedJobs(session.page);
  });
  afterAll(async () => {
    if (options.cleanUp && session && !session.page.isClosed()) await options.cleanUp(session.page).catch(() => {});
    await browser?.close();
  });
  stopAtFirstFailure(() => session?.page);
}
