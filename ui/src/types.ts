// The shapes of the API's answers the dashboard reads (see the OpenAPI document; the types
// generated from it are in api/schema.d.ts).
import type { components } from "./api/schema";

export type JobState = components["schemas"]["JobOut"]["state"];
export const JOB_STATES: JobState[] = [
  "PENDING",
  "RUNNING",
  "FAILED",
  "SUCCEEDED",
  "CANCELLED",
  "DEAD_LETTER",
];

export interface ErrorInfo {
  type: string;
  message: string;
  traceback: string;
}

export interface Job {
  id: number;
  queue: string;
  task: string;
  args: Record<string, unknown> | null;
  state: JobState;
  priority: number;
  attempts: number;
  max_attempts: number;
  run_at: string;
  created_at: string;
  created_by: string;
  result: unknown;
  finished_at: string | null;
  cancel_requested_at: string | null;
  error: ErrorInfo | null;
  omitted: string[];
  progress?: Progress | null;
}

export interface Progress {
  current: number;
  total: number | null;
  message: string | null;
  attempt: number;
  at: string | null;
  /** A running script's output so far: the last 4 kB of each stream. */
  output?: { stdout?: string; stderr?: string } | null;
}

export interface Execution {
  id: number;
  attempt: number;
  worker_id: string;
  state: string;
  started_at: string;
  finished_at: string | null;
  error: ErrorInfo | null;
}

export interface JobDetail extends Job {
  executions: Execution[];
}

export interface JobPage {
  items: Job[];
  next_cursor: number | null;
  total: { count: number; capped: boolean } | null;
}

export interface TimelineEntry {
  at: string;
  event: string;
  actor: string;
  attempt: number | null;
  detail: unknown;
}

export interface QueueStats {
  name: string;
  paused: boolean;
  pending: number;
  running: number;
  failed: number;
  succeeded: number;
  cancelled: number;
  dead_letter: number;
  oldest_pending_seconds: number | null;
  finished_last_5_minutes: number;
  unserved: { task: string; jobs: number; oldest_seconds: number }[];
}

export interface Throughput {
  buckets: {
    at: string;
    queue: string;
    succeeded: number;
    failed: number;
    dead_letter: number;
    cancelled: number;
  }[];
  succeeded: number;
  failed: number;
  dead_letter: number;
  cancelled: number;
}

export interface Worker {
  id: string;
  host: string;
  pid: number;
  queues: string[];
  tasks: string[];
  concurrency: number;
  in_flight: number;
  started_at: string;
  last_seen_at: string;
}

export interface Leader {
  name: string;
  holder: string;
  expires_at: string;
  live: boolean;
}

export interface Health {
  warnings: string[];
}

export const FINAL: JobState[] = ["SUCCEEDED", "CANCELLED", "DEAD_LETTER"];
