import type { Job } from "../types";

/** Milliseconds between two looks at a running script's output. */
export const OUTPUT_POLL = 1000;

/** What a running script has written so far (the last 4 kB of each stream). */
export function LiveOutput({ job }: { job: Job }) {
  const output = job.progress?.output;
  if (!output) return null;
  return (
    <section aria-labelledby="live-output-title">
      <h2 id="live-output-title">Output so far</h2>
      {output.stdout && (
        <pre className="code" tabIndex={0} aria-label="Standard output so far">
          {output.stdout}
        </pre>
      )}
      {output.stderr && (
        <pre className="code" tabIndex={0} aria-label="Standard error so far">
          {output.stderr}
        </pre>
      )}
    </section>
  );
}
