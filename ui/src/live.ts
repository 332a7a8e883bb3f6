// Live views: the server's event stream (GET /api/events) says when something changed and
// the views concerned ask again (claims arrive as "running", from the server's look at the
// live attempts every 2 s); a slow poll covers anything else, and a faster one stands in
// while the stream is down.
import { useQueryClient } from "@tanstack/react-query";
import { useEffect } from "react";
import { ApiError, endSession, readEvents, refresh } from "./api";

let streaming = false;

/** How often a live view asks again by itself (milliseconds). */
export function live(): number {
  return streaming ? 10_000 : 3_000;
}

const AFFECTS: Record<string, string[][]> = {
  jobs: [["jobs"], ["queues"]],
  finished: [["jobs"], ["job"], ["queues"], ["throughput"]],
  control: [["job"]],
  running: [["jobs"], ["job"], ["queues"], ["workers"]],
  resync: [[]],
};

/** Keep the stream open while the user is signed in (reconnecting with a growing pause). */
export function useEvents(signedIn: boolean): void {
  const client = useQueryClient();
  useEffect(() => {
    if (!signedIn) return;
    const stop = new AbortController();
    let pause = 1000;
    (async () => {
      while (!stop.signal.aborted) {
        try {
          await readEvents(
            (event) => {
              if (event.kind === "ended") {
                void refresh().then((user) => user || endSession());
                return;
              }
              for (const key of AFFECTS[event.kind] ?? []) {
                void client.invalidateQueries({ queryKey: key });
              }
            },
            stop.signal,
            () => {
              streaming = true;
              pause = 1000;
            },
          );
        } catch (error) {
          if (stop.signal.aborted) return;
          if (error instanceof ApiError && error.status === 401) {
            endSession();
            return;
          }
        } finally {
          streaming = false;
        }
        await new Promise((resolve) => setTimeout(resolve, pause));
        pause = Math.min(pause * 2, 30_000);
      }
    })();
    return () => stop.abort();
  }, [signedIn, client]);
}
