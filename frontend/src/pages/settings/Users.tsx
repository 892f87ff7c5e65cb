// Settings > Users (administrators only): who may sign in and with which role; add one,
// change a role, set a new password, delete. The server refuses leaving no administrator.
import { useState } from 'preact/hooks';
import { Alert, FieldError, invalidProps } from '../../components';
import { Options, TextField } from '../../widgets/Fields';
import { Table } from '../../widgets/Table';
import { formatDateTime } from '../../format';
import type { FieldRule } from '../../forms';
import { useAction, useResource, useSave } from '../../hooks';
import { api } from '../../session';
import type { User, UserRole } from '../../types';

/** Each role and what it may do, in the words the selectors use. */
export const ROLES: { role: UserRole; label: string; detail: string }[] = [
  { role: 'viewer', label: 'Viewer', detail: 'sees everything, changes nothing' },
  { role: 'operator', label: 'Operator', detail: 'also job and queue actions, scans' },
  { role: 'admin', label: 'Admin', detail: 'also users, settings, libraries, licence' },
];

const USER_RULES: readonly FieldRule[] = [
  // A name taken answers 409 `user "bob" exists`.
  { field: 'username', mentions: /^user .* exists$/ },
  { field: 'password' },
  { field: 'role' },
];

export function UsersSection({ me }: { me: string | null }) {
  const users = useResource(() => api.users(), []);
  const [notice, setNotice] = useState<string | null>(null);
  const [resetting, setResetting] = useState<string | null>(null);
  // Each user added starts a fresh form (a key on the list's length would also wipe what is
  // being typed when the list first arrives).
  const [added, setAdded] = useState(0);
  const action = useAction();

  const changeRole = async (user: User, role: UserRole) => {
    setNotice(null);
    const done = await action.run(async () => {
      await api.setUserRole(user.username, role);
      return true;
    });
    if (done) setNotice(`${user.username} is now ${role}; they sign in again.`);
    await users.reload();
  };
  const remove = async (user: User) => {
    if (!confirm(`Delete the user ${user.username}? Their API keys stop working.`)) return;
    setNotice(null);
    const done = await action.run(async () => {
      await api.deleteUser(user.username);
      return true;
    });
    if (done) setNotice(`${user.username} deleted.`);
    await users.reload();
  };

  const list = users.data ?? [];
  return (
    <section class="card" aria-labelledby="users-title">
      <h2 id="users-title">Users</h2>
      <p class="muted small">A new role or password ends the user's sessions: they sign in again. The last administrator cannot be removed or demoted.</p>
      <Alert message={users.error} />
      <Alert message={action.error} />
      <Alert kind="ok" message={notice} />
      {list.length > 0 && (
        <Table columns={['User', 'Role', 'Created']} actions>
          {list.map((user) => (
            <tr key={user.id}>
              <td data-label="User">
                {user.username}
                {user.username === me && <span class="muted small"> (you)</span>}
              </td>
              <td data-label="Role">
                <select
                  aria-label={`Role of ${user.username}`}
                  value={user.role}
                  disabled={action.busy}
                  onChange={(e) => void changeRole(user, e.currentTarget.value as UserRole)}
                >
                  <Options items={ROLES} value={(r) => r.role} label={(r) => r.label} />
                </select>
              </td>
              <td data-label="Created">{formatDateTime(user.createdAt)}</td>
              <td data-label="Actions">
                {resetting === user.username ? (
                  <PasswordForm
                    user={user}
                    onDone={(done) => {
                      setResetting(null);
                      if (done) setNotice(`New password set for ${user.username}.`);
                    }}
                  />
                ) : (
                  <div class="actions">
                    <button type="button" class="button" onClick={() => setResetting(user.username)} aria-label={`Set a new password for ${user.username}`}>
                      New password
                    </button>
                    <button type="button" class="button button-danger" disabled={action.busy} onClick={() => void remove(user)} aria-label={`Delete ${user.username}`}>
                      Delete
                    </button>
                  </div>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <NewUserForm
        key={added}
        onCreated={(user) => {
          setAdded((n) => n + 1);
          void users.reload().then(() => setNotice(`${user.username} added as ${user.role}.`));
        }}
      />
    </section>
  );
}

function PasswordForm({ user, onDone }: { user: User; onDone: (done: boolean) => void }) {
  const [password, setPassword] = useState('');
  const { busy, errors, save } = useSave(USER_RULES);
  const id = `user-${user.id}-password`;
  const submit = async (event: Event) => {
    event.preventDefault();
    const done = await save(async () => {
      await api.setUserPassword(user.username, password);
      return true;
    });
    if (done) onDone(true);
  };
  return (
    <form class="form" onSubmit={(e) => void submit(e)} aria-label={`New password for ${user.username}`} noValidate>
      <Alert message={errors.form} />
      <TextField label="New password" type="password" autocomplete="new-password" value={password} onValue={setPassword} errorId={`${id}-error`} error={errors.fields.password} />
      <div class="actions">
        <button type="submit" class="button button-primary" disabled={busy || password === ''}>
          {busy ? 'Setting…' : 'Set password'}
        </button>
        <button type="button" class="button" onClick={() => onDone(false)}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function NewUserForm({ onCreated }: { onCreated: (user: User) => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [role, setRole] = useState<UserRole>('viewer');
  const { busy, errors, save } = useSave(USER_RULES);
  const submit = async (event: Event) => {
    event.preventDefault();
    const made = await save(() => api.createUser({ username: username.trim(), password, role }));
    if (made) onCreated(made);
  };
  return (
    <form class="form" onSubmit={(e) => void submit(e)} aria-label="Add a user" noValidate>
      <h3 class="form-title">Add a user</h3>
      <Alert message={errors.form} />
      <div class="form-row">
        <TextField label="Username" value={username} autocomplete="off" onValue={setUsername} errorId="new-user-name-error" error={errors.fields.username} />
        <TextField
          label="Password"
          type="password"
          autocomplete="new-password"
          value={password}
          onValue={setPassword}
          errorId="new-user-password-error"
          error={errors.fields.password}
        />
        <label class="field">
          <span>Role</span>
          <select value={role} onChange={(e) => setRole(e.currentTarget.value as UserRole)} {...invalidProps('new-user-role-error', errors.fields.role)}>
            <Options items={ROLES} value={(r) => r.role} label={(r) => `${r.label}: ${r.detail}`} />
          </select>
          <FieldError id="new-user-role-error" message={errors.fields.role} />
        </label>
      </div>
      <button type="submit" class="button button-primary" disabled={busy || username.trim() === '' || password === ''}>
        {busy ? 'Adding…' : 'Add user'}
      </button>
    </form>
  );
}
