// Type-checked by `npm run typecheck` (never bundled): the types generated from the API's
// OpenAPI document (schema.d.ts, by openapi-typescript) refuse what the server refuses, so a
// client written against them cannot send it. A small bounded range is the union of its
// values (scripts/api-types.mjs), so a priority of 500 is refused too; wider bounds
// (max_attempts up to 1,000) are stated by the document, and tests/e2e/test_openapi_tools.py
// checks it declares them.
import type { components, operations } from "./schema";

type ListJobsQuery = NonNullable<operations["listJobs"]["parameters"]["query"]>;
type EnqueueBody = components["schemas"]["EnqueueIn"];

export const listed: ListJobsQuery = { state: ["PENDING", "DEAD_LETTER"], limit: 10 };
// @ts-expect-error: DONE is not a job state
export const unknownState: ListJobsQuery = { state: ["DONE"] };
// @ts-expect-error: a state filter is a list of states
export const bareState: ListJobsQuery = { state: "PENDING" };
// @ts-expect-error: an absent parameter is left out, never sent as null
export const nullQueue: ListJobsQuery = { queue: null };

export const enqueued: EnqueueBody = { task: "send_email", priority: 5, max_attempts: 3 };
// @ts-expect-error: a priority is a number
export const textPriority: EnqueueBody = { task: "send_email", priority: "high" };
// @ts-expect-error: a priority is at most 100
export const highPriority: EnqueueBody = { task: "send_email", priority: 500 };
// @ts-expect-error: a priority is at least -100
export const lowPriority: EnqueueBody = { task: "send_email", priority: -101 };
// @ts-expect-error: unknown fields are refused
export const unknownField: EnqueueBody = { task: "send_email", retries: 3 };
// @ts-expect-error: the task is required
export const noTask: EnqueueBody = { args: {} };

type BulkFilter = components["schemas"]["JobFilterIn"];
// @ts-expect-error: DONE is not a job state, in a bulk filter either
export const bulkDone: BulkFilter = { state: ["DONE"] };

type ScheduleEdit = components["schemas"]["ScheduleEditIn"];
export const clearedQueue: ScheduleEdit = { queue: null };
// @ts-expect-error: only queue and priority may be set to null
export const nullCron: ScheduleEdit = { cron: null };
