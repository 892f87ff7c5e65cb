// Settings > Your password: the signed-in user's own password, for every role.
import { useState } from 'preact/hooks';
import { Alert } from '../../components';
import { TextField } from '../../widgets/Fields';
import { useSave } from '../../hooks';
import { api, logout } from '../../session';

/** The signed-in user's own password: every token of theirs is revoked, so they sign in again. */
export function AccountSection() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  // A weak new password answers `password: …`.
  const { busy, errors, save } = useSave([{ field: 'newPassword', mentions: /^password/ }]);

  const submit = async (event: Event) => {
    event.preventDefault();
    const done = await save(async () => {
      await api.changePassword(current, next);
      return true;
    });
    // Every token was revoked: back to the login form.
    if (done) logout();
  };

  return (
    <section class="card" aria-labelledby="account-title">
      <h2 id="account-title">Your password</h2>
      <form class="form" onSubmit={(e) => void submit(e)}>
        <Alert message={errors.form} />
        <TextField label="Current password" type="password" autocomplete="current-password" value={current} onValue={setCurrent} required />
        <TextField
          label="New password"
          type="password"
          autocomplete="new-password"
          value={next}
          onValue={setNext}
          required
          errorId="account-new-error"
          error={errors.fields.newPassword}
        />
        <p class="muted small">Changing it signs you out everywhere, here included.</p>
        <button type="submit" class="button button-primary" disabled={busy || current === '' || next === ''}>
          {busy ? 'Changing…' : 'Change password'}
        </button>
      </form>
    </section>
  );
}
