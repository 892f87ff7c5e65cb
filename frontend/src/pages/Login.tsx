import { useState } from 'preact/hooks';
import { Alert } from '../components';
import { TextField } from '../widgets/Fields';
import { useAction } from '../hooks';
import { login } from '../session';

export function Login({ expired }: { expired: boolean }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const { busy, error, run } = useAction();

  const submit = (event: Event) => {
    event.preventDefault();
    void run(() => login(username.trim(), password));
  };

  return (
    <main class="login" id="main">
      <form class="card login-card" onSubmit={submit} aria-labelledby="login-title">
        <div class="brand brand-large" aria-hidden="true">
          <span class="brand-mark" />
          condense
        </div>
        <h1 id="login-title">Sign in</h1>
        {expired && !error && <Alert kind="info" message="Your session ended. Please sign in again." />}
        <Alert message={error} />
        <TextField label="Username" name="username" autocomplete="username" required value={username} onValue={setUsername} />
        <TextField label="Password" name="password" type="password" autocomplete="current-password" required value={password} onValue={setPassword} />
        <button type="submit" class="button button-primary button-block" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
