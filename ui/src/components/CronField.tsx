// The cron input of the schedule and definition forms: what it takes, said once. The server
// takes 5 fields (minute hour day month weekday), 6 with seconds first, or an alias (its
// schedule/cron.py ALIASES), read in the form's time zone, and refuses others naming the field.
import { useId } from "react";

export const CRON_LABEL = "Cron (5 fields, or 6 with seconds first)";
export const CRON_HELP =
  "minute hour day month weekday (e.g. */5 * * * *), or seconds first (30 */5 * * * *), or " +
  "@hourly, @daily (@midnight), @weekly, @monthly, @yearly (@annually); in the schedule's " +
  "time zone; at most one fire time per second (the server's scheduler.min_interval may set " +
  "a longer minimum)";

export function CronField({
  empty,
  defaultValue,
  required = false,
  placeholder,
}: {
  /** What an empty field means, when it may be left empty. */
  empty?: string;
  defaultValue?: string;
  required?: boolean;
  placeholder?: string;
}) {
  const id = useId();
  const help = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{CRON_LABEL}</label>
      <input
        id={id}
        name="cron"
        required={required}
        defaultValue={defaultValue}
        placeholder={placeholder}
        aria-describedby={help}
      />
      <small id={help}>
        {CRON_HELP}
        {empty && `; empty: ${empty}`}
      </small>
    </div>
  );
}
