// Shapes of the condense API (JSON, camelCase). Timestamps are ISO 8601 strings.

export const JOB_STATUSES = [
  'PENDING',
  'QUEUED',
  'ANALYZING',
  'ENCODING',
  'PAUSED',
  'COMPLETED',
  'SKIPPED',
  'FAILED',
  'CANCELLED',
] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export type JobStage = 'ANALYZING' | 'ENCODING' | 'TRANSFERRING';

export interface Job {
  id: number;
  fileName: string;
  filePath: string;
  libraryId: number | null;
  status: JobStatus;
  stage: JobStage | null;
  progress: number;
  fps: number | null;
  node: string | null;
  etaSeconds: number | null;
  retryCount: number;
  failureReason: string | null;
  failureCode: string | null;
  stalled: boolean;
  sourceCodec: string | null;
  targetCodec: string | null;
  sourceSize: number | null;
  outputSize: number | null;
  savedBytes: number | null;
  createdAt: string;
  startedAt: string | null;
  completedAt: string | null;
  updatedAt: string;
}

export interface JobEvent {
  id: number;
  at: string;
  kind: string;
  fromStatus: JobStatus | null;
  toStatus: JobStatus | null;
  nodeName: string | null;
  detail: string | null;
}

export interface JobDetail extends Job {
  events: JobEvent[];
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  pageSize: number;
}

export interface JobQuery {
  page?: number;
  pageSize?: number;
  status?: JobStatus[];
  libraryId?: number;
  node?: string;
  q?: string;
  sort?: string;
  order?: 'asc' | 'desc';
}

export type JobAction = 'pause' | 'resume' | 'retry' | 'cancel' | 'force';

export interface QueueStats {
  pending: number;
  queued: number;
  analyzing: number;
  encoding: number;
  paused: number;
  completed: number;
  failed: number;
  skipped: number;
  cancelled: number;
  activeWorkers: number;
  throughputPerHour: number;
  estimatedCompletionHours: number | null;
}

export type HealthLevel = 'HEALTHY' | 'WARNING' | 'CRITICAL';

export interface HealthCheck {
  name: string;
  level: HealthLevel;
  value: string | number | null;
  message: string;
}

export interface Health {
  overall: HealthLevel;
  checks: HealthCheck[];
}

export interface Disk {
  path: string;
  total: number;
  used: number;
  free: number;
  usedPercent: number;
}

export interface SystemStats {
  cpu: { load1: number; cores: number; loadRatio: number };
  memory: { used: number; total: number; percent: number; trend: { at: string; percent: number }[] };
  disks: Disk[];
}

export type NodeStatus = 'ONLINE' | 'DEGRADED' | 'OFFLINE';

export interface ClusterNode {
  id: number;
  name: string;
  role: 'main' | 'linked' | string;
  address: string;
  status: NodeStatus;
  statusReason: string | null;
  gpu: string | null;
  load1: number;
  cores: number;
  loadRatio: number;
  memoryUsed: number;
  memoryTotal: number;
  activeJobs: number;
  maxJobs: number;
  encoders: string[];
  overloaded: boolean;
  lastSeenAt: string | null;
  /** A linked node's identity, given at its first registration (null for the main node). */
  identity: string | null;
}

export interface Dashboard {
  health: Health;
  system: SystemStats;
  queue: QueueStats;
  activeJobs: Job[];
  nodes: ClusterNode[];
}

export type Codec = 'hevc' | 'av1';

export interface Library {
  id: number;
  name: string;
  paths: string[];
  targetCodec: Codec;
  encoder: string;
  quality: number;
  preset: string;
  watch: boolean;
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
  lastScanAt: string | null;
}

export type LibraryInput = Pick<
  Library,
  'name' | 'paths' | 'targetCodec' | 'encoder' | 'quality' | 'preset' | 'watch' | 'enabled'
>;

export interface HistoryDay {
  date: string;
  completed: number;
  savedBytes: number;
  averageFps: number | null;
}

export interface InsightStats {
  history: HistoryDay[];
  totals: { completed: number; savedBytes: number; averageFps: number | null };
  failedJobs: { jobId: number; fileName: string; reason: string; node: string | null; date: string }[];
  storage: { totalSavedBytes: number; filesProcessed: number; averageSavingsPercent: number | null };
  encodingTime: { cpuSeconds: number; wallSeconds: number; efficiency: number | null };
}

export interface SavingsDay {
  date: string;
  savedBytes: number;
  cumulativeBytes: number;
}

export interface NodePerformance {
  node: string;
  jobs: number;
  /** Fraction 0..1. */
  successRate: number | null;
  savedBytes: number;
  throughputPerHour: number;
}

export interface CodecShare {
  codec: string;
  count: number;
  share: number;
}

export interface Settings {
  jobTimeoutHours: number;
  keepOriginals: boolean;
  clusterToken: string;
}

export interface License {
  tier: 'FREE' | 'SUPPORTER' | 'PRO' | string;
  licensee: string | null;
  expiresAt: string | null;
  maxNodes: number | null;
  maxConcurrentJobs: number | null;
}

export interface LoginResponse {
  token: string;
  expiresAt: string;
}

/** A WebSocket message from /ws. Only jobId, progress and status are guaranteed. */
export interface LiveMessage {
  type: 'snapshot' | 'progress' | 'status' | string;
  jobId: number;
  progress?: number;
  status?: JobStatus;
  fps?: number | null;
  stage?: JobStage | null;
  etaSeconds?: number | null;
  node?: string | null;
  stalled?: boolean;
  fileName?: string;
}
