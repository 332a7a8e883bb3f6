// Times in the browser's zone, with the UTC time on hover (and for screen readers).
export function utc(value: string): string {
  return new Date(value).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

export function local(value: string): string {
  return new Date(value).toLocaleString(undefined, {
    year: "numeric",
    month: "short",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  });
}

export function Time({ value }: { value: string | null | undefined }) {
  if (!value) return <span aria-label="none">-</span>;
  return (
    <time dateTime={value} title={utc(value)}>
      {local(value)}
    </time>
  );
}

/** "3 min", "2 h 5 min": an age in seconds, for waiting times. */
export function age(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "-";
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  const hours = Math.floor(seconds / 3600);
  return `${hours} h ${Math.floor((seconds % 3600) / 60)} min`;
}
