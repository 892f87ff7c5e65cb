// Settings > Notifications: where condense tells what happened, each target with its events,
// its last delivery or error, a test; edited in place through the shared outlet editor.
import { FieldError } from '../../components';
import { api } from '../../session';
import type { NotificationKind, NotificationTarget, NotificationTargetInput, SubscribableEvent } from '../../types';
import { OutletSection, type ExtraEditorProps, type OutletConfig } from '../../widgets/OutletSection';

/** Every event a target can want, in the order the form lists them. */
export const NOTIFICATION_EVENTS: { event: SubscribableEvent; label: string }[] = [
  { event: 'job.completed', label: 'Job completed' },
  { event: 'job.failed', label: 'Job failed' },
  { event: 'queue.drained', label: 'Queue drained' },
  { event: 'node.offline', label: 'Node offline' },
  { event: 'node.online', label: 'Node back online' },
  { event: 'health.changed', label: 'Health warning, critical or back to healthy' },
  { event: 'disk.at_risk', label: 'Library disk above 90 %' },
  { event: 'file.damaged', label: 'A scheduled health check found a damaged file' },
];

/** What each kind wants as its URL and secret, for the form's hints. */
export const NOTIFICATION_KINDS: { kind: NotificationKind; label: string; url: string; secret: string }[] = [
  { kind: 'webhook', label: 'Webhook', url: 'https://example.org/hooks/condense', secret: 'Signing key (X-Condense-Signature), optional' },
  { kind: 'discord', label: 'Discord', url: 'https://discord.com/api/webhooks/ID/TOKEN', secret: 'Not used' },
  { kind: 'ntfy', label: 'ntfy', url: 'https://ntfy.sh/your-topic', secret: 'Access token, optional' },
  { kind: 'gotify', label: 'Gotify', url: 'https://gotify.example.org', secret: 'Application token (required)' },
  { kind: 'apprise', label: 'Apprise API', url: 'http://apprise:8000/notify/condense', secret: 'Not used' },
  { kind: 'email', label: 'E-mail (SMTP)', url: 'smtp://user@mail.example.org:587?tls=required&from=condense@example.org&to=you@example.org', secret: 'SMTP password, optional' },
];

function EventsEditor({ value, onChange, idPrefix, error }: ExtraEditorProps<SubscribableEvent[]>) {
  const toggle = (event: SubscribableEvent, on: boolean) =>
    onChange((current) => (on ? [...current.filter((e) => e !== event), event] : current.filter((e) => e !== event)));
  return (
    <fieldset class="field" aria-describedby={error ? `${idPrefix}-events-error` : undefined}>
      <legend>Events</legend>
      {NOTIFICATION_EVENTS.map(({ event, label }) => (
        <label key={event} class="check-field">
          <input type="checkbox" checked={value.includes(event)} onChange={(e) => toggle(event, e.currentTarget.checked)} />
          <span>{label}</span>
        </label>
      ))}
      <FieldError id={`${idPrefix}-events-error`} message={error} />
    </fieldset>
  );
}

const config: OutletConfig<NotificationTarget, NotificationKind, SubscribableEvent[], NotificationTargetInput> = {
  slug: 'notifications',
  title: 'Notifications',
  intro: 'Each message is kept until its target takes it, across restarts, and tried again with a growing wait (30 s up to an hour).',
  noun: 'target',
  kindLabel: 'Kind',
  kinds: NOTIFICATION_KINDS,
  secretLabel: 'Secret',
  secretRequired: false,
  secretRemovable: true,
  hasSecret: (target) => target.hasSecret,
  secretCleared: (target) => target.secretCleared,
  lastLabel: 'Last delivery',
  extraLabel: 'Events',
  showExtra: (target) => target.events.join(', '),
  // A target holds only events it may subscribe to (the server refuses others).
  extraOf: (target) => target.events.filter((e): e is SubscribableEvent => NOTIFICATION_EVENTS.some((n) => n.event === e)),
  emptyExtra: () => ['job.completed', 'job.failed'],
  extraReady: (events) => events.length > 0,
  ExtraEditor: EventsEditor,
  body: (draft, id) => {
    const base = { name: draft.name.trim(), kind: draft.kind, url: draft.url.trim(), events: draft.extra };
    // A new target: null is "no secret". An edit: left out keeps the stored one, "" removes it.
    if (id === null) return { ...base, secret: draft.secret === '' ? null : draft.secret };
    const secret = draft.clearSecret ? { secret: '' } : draft.secret === '' ? {} : { secret: draft.secret };
    return { ...base, enabled: draft.enabled, ...secret };
  },
  rules: [
    { field: 'name' },
    { field: 'secret', mentions: /token|secret|password/i },
    { field: 'extra', mentions: /event/i },
    { field: 'url', mentions: /\burl\b/i },
  ],
  list: () => api.notificationTargets(),
  create: (body) => api.createNotificationTarget(body),
  update: (id, body) => api.updateNotificationTarget(id, body),
  remove: (id) => api.deleteNotificationTarget(id),
  test: (id) => api.testNotificationTarget(id),
  testWords: (name, result) => (result.delivered ? `“${name}” took the test.` : `“${name}” did not take the test: ${result.error ?? ''}`),
};

export function NotificationsSection({ editable }: { editable: boolean }) {
  return <OutletSection config={config} editable={editable} />;
}
