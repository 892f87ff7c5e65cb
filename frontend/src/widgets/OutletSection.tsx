// The one editor of the places condense tells about what happened: notification targets and
// connections (Plex, Jellyfin, Emby, Sonarr, Radarr) are both a name, a kind, a URL, a
// write-only secret, something of their own (events; path mappings), a delivery record and a
// test. Each section describes its resource (`OutletConfig`); this lists, adds, edits in place,
// tests and removes, with the server's validation messages beside their fields.
import type { ComponentChildren, JSX } from 'preact';
import { useState } from 'preact/hooks';
import { Alert } from '../components';
import { Options, TextField } from './Fields';
import { Table } from './Table';
import { formatDateTime } from '../format';
import type { FieldRule, FormErrors } from '../forms';
import { useAction, useResource, useSave } from '../hooks';
import type { NotificationTestResult } from '../types';

/** What a notification target and a connection have in common, as served. */
export interface Outlet {
  id: number;
  name: string;
  kind: string;
  url: string;
  enabled: boolean;
  lastDeliveredAt?: string | null;
  lastError?: string | null;
  lastErrorAt?: string | null;
  waiting: number;
}

/** A kind, its label and the hints its form shows. */
export interface OutletKind<K extends string> {
  kind: K;
  label: string;
  url: string;
  secret: string;
}

/** The form's state; `extra` is the section's own part (events, path mappings). */
export interface OutletDraft<K extends string, X> {
  name: string;
  kind: K;
  url: string;
  /** Empty on an edit: keep the stored one. */
  secret: string;
  /** Remove the stored secret (where the section allows it). */
  clearSecret: boolean;
  enabled: boolean;
  extra: X;
}

export interface ExtraEditorProps<X> {
  value: X;
  /** An update of the value as it is then: several changes may come before a render. */
  onChange: (update: (current: X) => X) => void;
  idPrefix: string;
  error: string | undefined;
}

export interface OutletConfig<T extends Outlet, K extends string, X, B> {
  /** Names the section's ids: `${slug}-title`. */
  slug: string;
  title: string;
  intro: ComponentChildren;
  /** "target", "connection": the buttons' words. */
  noun: string;
  kindLabel: string;
  kinds: readonly OutletKind<K>[];
  secretLabel: string;
  /** A new one cannot be made without a secret. */
  secretRequired: boolean;
  /** An edit may remove the stored secret ("" sent). */
  secretRemovable: boolean;
  hasSecret: (item: T) => boolean;
  /** The answer to an update says the stored secret was cleared (the URL moved host). */
  secretCleared: (item: T) => boolean;
  lastLabel: string;
  extraLabel: string;
  showExtra: (item: T) => ComponentChildren;
  extraOf: (item: T) => X;
  emptyExtra: () => X;
  /** Whether the section's own part is complete enough to send. */
  extraReady: (value: X) => boolean;
  ExtraEditor: (props: ExtraEditorProps<X>) => JSX.Element;
  /** The body of a create (`id` null) or an update. */
  body: (draft: OutletDraft<K, X>, id: number | null) => B;
  /** Server messages to fields: `name`, `url`, `secret`, `extra`. */
  rules: readonly FieldRule[];
  list: () => Promise<T[]>;
  create: (body: B) => Promise<T>;
  update: (id: number, body: B) => Promise<T>;
  remove: (id: number) => Promise<void>;
  test: (id: number) => Promise<NotificationTestResult>;
  testWords: (name: string, result: NotificationTestResult) => string;
}

function draftOf<T extends Outlet, K extends string, X, B>(config: OutletConfig<T, K, X, B>, item: T | null): OutletDraft<K, X> {
  if (!item) return { name: '', kind: config.kinds[0].kind, url: '', secret: '', clearSecret: false, enabled: true, extra: config.emptyExtra() };
  return { name: item.name, kind: item.kind as K, url: item.url, secret: '', clearSecret: false, enabled: item.enabled, extra: config.extraOf(item) };
}

/** The last delivery, and the last error when it came after it. */
function DeliveryCell({ item }: { item: Outlet }) {
  const failedSince = item.lastError && (!item.lastDeliveredAt || (item.lastErrorAt ?? '') > item.lastDeliveredAt);
  return (
    <>
      {item.lastDeliveredAt ? formatDateTime(item.lastDeliveredAt) : 'Never'}
      {failedSince && <span class="small text-bad break"> Failed: {item.lastError}</span>}
    </>
  );
}

export function OutletSection<T extends Outlet, K extends string, X, B>({ config, editable }: { config: OutletConfig<T, K, X, B>; editable: boolean }) {
  const items = useResource(config.list, []);
  const [editing, setEditing] = useState<number | null>(null);
  // Each one added starts a fresh form (a key on the list's length would also wipe what is
  // being typed when the list first arrives).
  const [added, setAdded] = useState(0);
  const [notice, setNotice] = useState<string | null>(null);
  const action = useAction();
  const kindLabel = (kind: string) => config.kinds.find((k) => k.kind === kind)?.label ?? kind;

  const test = async (item: T) => {
    setNotice(null);
    const result = await action.run(() => config.test(item.id));
    if (result) setNotice(config.testWords(item.name, result));
    await items.reload();
  };
  const remove = async (item: T) => {
    if (!confirm(`Remove “${item.name}”? What still waits for it is dropped.`)) return;
    setNotice(null);
    await action.run(() => config.remove(item.id));
    await items.reload();
  };
  const saved = async (item: T, created: boolean) => {
    setEditing(null);
    if (created) setAdded((n) => n + 1);
    const cleared = !created && config.secretCleared(item);
    setNotice(
      created
        ? `“${item.name}” added.`
        : cleared
          ? `“${item.name}” saved. Its ${config.secretLabel.toLowerCase()} was removed: the URL now points at another host. Enter it again.`
          : `“${item.name}” saved.`,
    );
    await items.reload();
  };

  const list = items.data ?? [];
  const columns = editable ? 7 : 6;
  return (
    <section class="card" aria-labelledby={`${config.slug}-title`}>
      <h2 id={`${config.slug}-title`}>{config.title}</h2>
      <p class="muted small">{config.intro}</p>
      <Alert message={items.error} />
      <Alert message={action.error} />
      <Alert kind="ok" message={notice} />
      {list.length > 0 && (
        <Table columns={['Name', config.kindLabel, config.extraLabel, config.secretLabel, config.lastLabel, 'Waiting']} actions={editable}>
          {list.map((item) =>
            editing === item.id ? (
              <tr key={item.id} class="row-editor">
                <td colSpan={columns} class="cell-editor">
                  <OutletForm config={config} item={item} onSaved={(changed) => void saved(changed, false)} onCancel={() => setEditing(null)} />
                </td>
              </tr>
            ) : (
              <tr key={item.id}>
                <td data-label="Name">
                  {item.name}
                  {!item.enabled && <span class="badge badge-muted">Off</span>}
                </td>
                <td data-label={config.kindLabel}>{kindLabel(item.kind)}</td>
                <td data-label={config.extraLabel} class="small break">
                  {config.showExtra(item)}
                </td>
                <td data-label={config.secretLabel}>{config.hasSecret(item) ? 'Set' : <span class="muted">Not set</span>}</td>
                <td data-label={config.lastLabel}>
                  <DeliveryCell item={item} />
                </td>
                <td data-label="Waiting">{item.waiting}</td>
                {editable && (
                  <td data-label="Actions" class="actions">
                    <button type="button" class="button" disabled={action.busy} onClick={() => void test(item)} aria-label={`${config.noun === 'target' ? 'Send a test to' : 'Test'} ${item.name}`}>
                      Test
                    </button>
                    <button type="button" class="button" onClick={() => setEditing(item.id)} aria-label={`Edit ${item.name}`}>
                      Edit
                    </button>
                    <button type="button" class="button button-danger" disabled={action.busy} onClick={() => void remove(item)} aria-label={`Remove ${item.name}`}>
                      Remove
                    </button>
                  </td>
                )}
              </tr>
            ),
          )}
        </Table>
      )}
      {editable && <OutletForm key={added} config={config} item={null} onSaved={(made) => void saved(made, true)} />}
    </section>
  );
}

/** Adds one (`item` null) or edits `item` in place; the secret is never shown, only whether one is set. */
function OutletForm<T extends Outlet, K extends string, X, B>({
  config,
  item,
  onSaved,
  onCancel,
}: {
  config: OutletConfig<T, K, X, B>;
  item: T | null;
  onSaved: (item: T) => void;
  onCancel?: () => void;
}) {
  const [draft, setDraft] = useState<OutletDraft<K, X>>(() => draftOf(config, item));
  const { busy, errors, save } = useSave(config.rules);
  const set = (change: Partial<OutletDraft<K, X>>) => setDraft((current) => ({ ...current, ...change }));
  const hints = config.kinds.find((k) => k.kind === draft.kind);
  const id = `${config.slug}-${item ? `edit-${item.id}` : 'new'}`;
  const stored = item !== null && config.hasSecret(item);
  const secretMissing = config.secretRequired && draft.secret === '' && (item === null || !stored || draft.clearSecret);
  const ready = draft.name.trim() !== '' && draft.url.trim() !== '' && config.extraReady(draft.extra) && !secretMissing;

  const submit = async (event: Event) => {
    event.preventDefault();
    const body = config.body(draft, item ? item.id : null);
    const result = await save(() => (item ? config.update(item.id, body) : config.create(body)));
    if (result) onSaved(result);
  };
  const error = (field: string): string | undefined => (errors as FormErrors).fields[field];

  return (
    <form class="form" onSubmit={(e) => void submit(e)} aria-label={item ? `Edit ${item.name}` : `Add a ${config.noun}`} noValidate>
      {item && <h3 class="form-title">Edit “{item.name}”</h3>}
      <Alert message={errors.form} />
      <TextField label="Name" value={draft.name} maxLength={100} onValue={(name) => set({ name })} required errorId={`${id}-name-error`} error={error('name')} />
      <label class="field">
        <span>{config.kindLabel}</span>
        <select value={draft.kind} onChange={(e) => set({ kind: e.currentTarget.value as K })}>
          <Options items={config.kinds} value={(k) => k.kind} label={(k) => k.label} />
        </select>
      </label>
      <TextField label="URL" value={draft.url} placeholder={hints?.url} onValue={(url) => set({ url })} required errorId={`${id}-url-error`} error={error('url')} />
      <TextField
        label={config.secretLabel}
        type="password"
        autocomplete="off"
        value={draft.secret}
        disabled={draft.clearSecret}
        placeholder={stored ? 'Set: leave empty to keep it' : hints?.secret}
        onValue={(secret) => set({ secret })}
        required={config.secretRequired && !stored}
        errorId={`${id}-secret-error`}
        error={error('secret')}
      />
      {stored && config.secretRemovable && (
        <label class="check-field">
          <input type="checkbox" checked={draft.clearSecret} onChange={(e) => set({ clearSecret: e.currentTarget.checked, secret: '' })} />
          <span>Remove the stored {config.secretLabel.toLowerCase()}</span>
        </label>
      )}
      <config.ExtraEditor value={draft.extra} onChange={(update) => setDraft((current) => ({ ...current, extra: update(current.extra) }))} idPrefix={id} error={error('extra')} />
      {item && (
        <label class="check-field">
          <input type="checkbox" checked={draft.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked })} />
          <span>Enabled</span>
        </label>
      )}
      <div class="actions">
        <button type="submit" class="button button-primary" disabled={busy || !ready}>
          {busy ? 'Saving…' : item ? 'Save' : `Add ${config.noun}`}
        </button>
        {onCancel && (
          <button type="button" class="button" onClick={onCancel}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}
