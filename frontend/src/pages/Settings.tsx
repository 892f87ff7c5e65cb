// The Settings page: which sections a role sees, and their order. Each section is its own file
// under settings/; what a role may not change is not shown (the server refuses it anyway).
import { useEffect, useState } from 'preact/hooks';
import { useResource, useRole } from '../hooks';
import { allows, api } from '../session';
import { AccountSection } from './settings/Account';
import { ApiKeysSection } from './settings/ApiKeys';
import { AuditSection } from './settings/Audit';
import { ConnectionsSection } from './settings/Connections';
import { EnrollmentSection, GeneralSection } from './settings/General';
import { LicenseSection } from './settings/License';
import { NotificationsSection } from './settings/Notifications';
import { PathMappingsSection } from './settings/PathMappings';
import { ScheduleSection } from './settings/Schedule';
import { UsersSection } from './settings/Users';

export function Settings() {
  const role = useRole();
  return (
    <div class="page">
      <header class="page-head">
        <h1>Settings</h1>
      </header>
      {allows(role, 'admin') ? <AdminSettings /> : <AccountSection />}
    </div>
  );
}

/** The signed-in user's name, to mark them in the users list. */
function useMe(): string | null {
  const [me, setMe] = useState<string | null>(null);
  useEffect(() => {
    api.me().then(
      (who) => setMe(who.username),
      () => setMe(null),
    );
  }, []);
  return me;
}

/** What only an administrator may see and change (the server refuses it to others). */
function AdminSettings() {
  const settings = useResource(() => api.settings(), []);
  const me = useMe();
  return (
    <>
      <div class="grid grid-2">
        <LicenseSection />
        <div class="stack-gap">
          <GeneralSection settings={settings} />
          <EnrollmentSection settings={settings} />
          <AccountSection />
        </div>
      </div>
      <UsersSection me={me} />
      <ApiKeysSection />
      <ScheduleSection editable />
      <NotificationsSection editable />
      <ConnectionsSection editable />
      <PathMappingsSection />
      <AuditSection />
    </>
  );
}
