// Signing in: a wrong password is refused with a message; the right one opens the overview
// and keeps the token in localStorage["token"] (spec), which survives a reload.
import { describe, expect, it } from 'vitest';
import { mainNav, password, shareSession, uiUrl, username, type Session } from './support';

describe('signing in', () => {
  let session: Session;
  shareSession({}, (opened) => (session = opened));

  it('refuses a wrong password with a visible error and stores no token', async () => {
    const { page } = session;
    await page.goto(`${uiUrl}/#/`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect((await alert.textContent())?.trim()).not.toBe('');
    expect(await page.evaluate(() => localStorage.getItem('token'))).toBeNull();
    expect(await mainNav(page).count()).toBe(0);
  });

  it('lands on the overview with the right password, the token in localStorage', async () => {
    const { page } = session;
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await expect.poll(() => mainNav(page).getByRole('link', { name: 'Overview' }).getAttribute('aria-current')).toBe('page');
    const token = await page.evaluate(() => localStorage.getItem('token'));
    expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    await expect.poll(() => page.getByRole('alert').count()).toBe(0);

    // The session survives a reload (the token is read back from localStorage).
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect(await page.getByRole('button', { name: 'Sign in' }).count()).toBe(0);
  });

  it('signs out, forgetting the token', async () => {
    const { page } = session;
    await mainNav(page).getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect(await page.evaluate(() => localStorage.getItem('token'))).toBeNull();
    expect(session.pageErrors).toEqual([]);
  });
});
