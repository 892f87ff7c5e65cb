// Names the dashboard uses for the API's shapes. Every shape comes from generated/api.ts,
// which scripts/api-types.sh generates from the server's OpenAPI document (itself generated
// from the Rust types): nothing here is written by hand, so a change to the API that the
// dashboard does not follow fails its type check.
import type { components, operations } from './generated/api';
import { jobStatusValues } from './generated/api';

type Schemas = components['schemas'];

export const JOB_STATUSES = jobStatusValues;
export type JobStatus = Schemas['JobStatus'];
export type JobStage = Schemas['Stage'];
/** An action a user may take on a job; a job lists the ones its status allows in `actions`. */
export type JobAction = Schemas['UserAction'];

export type Job = Schemas['JobView'];
/** A file moving between the main node and a node that does not see the library. */
export type Transfer = Schemas['LiveTransfer'];
export type JobEvent = Schemas['JobEventView'];
export type JobDetail = Schemas['JobDetailView'];
export type JobPage = Schemas['Page_JobView'];
/** GET /jobs's query, with the statuses as a list (the client joins them with commas). */
export type JobQuery = Omit<NonNullable<operations['list_jobs']['parameters']['query']>, 'status'> & {
  status?: JobStatus[];
};
export type Affected = Schemas['Affected'];
export type ScanReport = Schemas['ScanReport'];

export type QueueStats = Schemas['QueueStats'];
export type HealthLevel = Schemas['HealthLevel'];
export type HealthCheck = Schemas['Check'];
export type Health = Schemas['HealthView'];
/** The node's own checks (library paths readable, their disks), re-run hourly and on demand. */
export type RecheckReport = Schemas['RecheckReport'];
export type NodeCheck = Schemas['NodeCheck'];
export type Disk = Schemas['DiskView'];
export type SystemStats = Schemas['SystemView'];
export type NodeStatus = Schemas['NodeStatus'];
export type ClusterNode = Schemas['NodeView'];
export type NodeChanged = Schemas['NodeChanged'];
export type Dashboard = Schemas['DashboardView'];

export type Codec = Schemas['TargetCodec'];
/** GET /encoders: per codec its encoders, presets, quality scale and defaults. */
export type EncoderCatalog = Schemas['EncoderCatalog'];
export type CodecInfo = Schemas['CodecEntry'];
export type EncoderInfo = Schemas['EncoderEntry'];
export type QualityRange = Schemas['QualityRange'];
export type Library = Schemas['LibraryView'];
export type Forecast = Schemas['ForecastView'];
export type ForecastFile = Schemas['ForecastFile'];
export type LibraryInput = Pick<
  Library,
  | 'name'
  | 'paths'
  | 'targetCodec'
  | 'encoder'
  | 'quality'
  | 'preset'
  | 'qualityMode'
  | 'targetVmaf'
  | 'keepDolbyVision'
  | 'keepModifiedTime'
  | 'rateControl'
  | 'targetBitrateKbps'
  | 'maxSizePercent'
  | 'streamRules'
  | 'healthSchedule'
  | 'healthAction'
  | 'watch'
  | 'enabled'
>;
// A library's health check (issue 38): its latest run, the findings per file, what to do.
export type HealthSchedule = Schemas['HealthSchedule'];
export type HealthAction = Schemas['HealthAction'];
export type HealthDepth = Schemas['Depth'];
export type HealthVerdict = Schemas['Verdict'];
export type HealthRun = Schemas['HealthRunView'];
export type HealthCounts = Schemas['HealthCounts'];
export type FileHealth = Schemas['FileHealthView'];
/** A Sonarr or Radarr connection "get a new copy" may ask about a file. */
export type NewCopySource = Schemas['NewCopySource'];
export type LibraryHealth = Schemas['LibraryHealthView'];
export type LibraryHealthQuery = NonNullable<operations['get_library_health']['parameters']['query']>;
export type NewCopyResult = Schemas['RegrabView'];
/** What each file becomes besides its video, and which files are left alone (issue 37). */
export type StreamRules = Schemas['StreamRules'];
export type AudioCodec = Schemas['AudioCodec'];
export type ContainerRule = Schemas['ContainerRule'];

// GET /jobs/{id}/plan (issue 37): the plan, flattened, with its basis, job and rules.
export type StreamFate = Schemas['Fate'];
export type PlannedStream = Schemas['PlannedStream'];
export type StreamPlan = Schemas['StreamPlan'];
export type JobPlan = Schemas['JobPlanView'];

export type HistoryDay = Schemas['DayHistory'];
export type InsightStats = Schemas['InsightsView'];
export type SavingsDay = Schemas['SavingsDay'];
export type Savings = Schemas['SavingsView'];
export type NodePerformance = Schemas['NodePerformance'];
export type CodecShare = Schemas['CodecShare'];
export type FailureBreakdown = Schemas['FailureBreakdown'];
export type FailureCategoryShare = Schemas['FailureCategoryShare'];

export type Settings = Schemas['SettingsView'];
export type SettingsUpdate = Schemas['UpdateSettings'];
export type License = Schemas['LicenseView'];
export type LoginResponse = Schemas['TokenResponse'];
export type Me = Schemas['Me'];
export type AuditEntry = Schemas['AuditEntryView'];
export type ApiKey = Schemas['ApiKeyView'];
export type CreatedApiKey = Schemas['CreatedApiKey'];
export type KeyScope = Schemas['KeyScope'];
export type AuditPage = Schemas['Page_AuditEntryView'];
export type NotificationTarget = Schemas['TargetView'];
export type NotificationTargetInput = Schemas['TargetBody'];
export type NotificationEvent = Schemas['NotifyEvent'];
/** The events a target may subscribe to (the test and file.replaced are sent otherwise). */
export type SubscribableEvent = NotificationTargetInput['events'][number];
export type NotificationKind = Schemas['TargetKind'];
export type NotificationTestResult = Schemas['TestResult'];
export type Connection = Schemas['ConnectionView'];
export type ConnectionInput = Schemas['ConnectionBody'];
export type ConnectionKind = Schemas['ConnectionKind'];
export type PathMapping = Schemas['PathMapping'];
export type ArrSettings = Schemas['ArrSettings'];
export type User = Schemas['UserView'];
export type UserRole = Schemas['UserRole'];
export type NewUser = Schemas['CreateUser'];
/** An encoding schedule as set (PUT), and as served with whether it is open now. */
export type Schedule = Schemas['Schedule'];
export type ScheduleView = Schemas['ScheduleView'];
export type ScheduleWindow = Schemas['Window'];
export type Day = Schemas['Day'];
export type OnClose = Schemas['OnClose'];

/** A WebSocket message from /ws. */
export type LiveMessage = Schemas['JobUpdate'];
