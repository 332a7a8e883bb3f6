// The body of a bulk retry or cancel from the jobs listing's filter. The API refuses an empty
// filter (a request that lost its filter must not act on the whole queue), so a listing
// with no filter, whose buttons say they act on every job, says `all: true` itself.

export type BulkBody = {
  state?: string[];
  queue?: string;
  task?: string;
  created_from?: string;
  created_to?: string;
  all?: true;
};

export function bulkBody(filter: URLSearchParams): BulkBody {
  const state = filter.get("state");
  const where: BulkBody = {
    state: state ? [state] : undefined,
    queue: filter.get("queue") ?? undefined,
    task: filter.get("task") ?? undefined,
    created_from: filter.get("created_from") ?? undefined,
    created_to: filter.get("created_to") ?? undefined,
  };
  const every = Object.values(where).every((value) => value === undefined);
  return every ? { ...where, all: true } : where;
}
