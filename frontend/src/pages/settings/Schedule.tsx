// Settings > Encoding windows: the default schedule, which every node without one of its own
// follows (a node's own is edited on the Nodes page).
import { Alert, Loading } from '../../components';
import { useResource } from '../../hooks';
import { api } from '../../session';
import { ScheduleEditor } from '../../widgets/ScheduleEditor';

export function ScheduleSection({ editable }: { editable: boolean }) {
  const schedule = useResource(() => api.defaultSchedule(), []);
  return (
    <section class="card" aria-labelledby="schedule-title">
      <h2 id="schedule-title">Encoding windows</h2>
      <p class="muted small">
        When nodes may encode: paint the hours by dragging across the grid (start on an open hour to close hours). Nodes without a schedule of their
        own follow this one; give a node its own on the Nodes page.
      </p>
      <Alert message={schedule.error} />
      {schedule.data ? (
        <ScheduleEditor label="Default schedule" schedule={schedule.data} editable={editable} onSave={(body) => api.setDefaultSchedule(body)} />
      ) : (
        schedule.loading && <Loading what="the schedule" />
      )}
    </section>
  );
}
