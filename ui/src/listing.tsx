// What the paged, filtered listings (jobs, signals, the audit log) share: their filters kept
// in the address (so a filtered page can be shared), the form that sets them, and the
// cursor pages of the API.
import type { FormEvent } from "react";
import { Link, useSearchParams } from "react-router";

export const PAGE_SIZE = "50";

export function useListing(names: readonly string[], convert?: (name: string, value: string) => string) {
  const [params, setParams] = useSearchParams();
  const filter = new URLSearchParams();
  for (const name of names) {
    const value = params.get(name);
    if (value) filter.set(name, value);
  }
  const before = params.get("before_id");
  const query = new URLSearchParams(filter);
  query.set("limit", PAGE_SIZE);
  if (before) query.set("before_id", before);
  function apply(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const next = new URLSearchParams();
    for (const name of names) {
      const value = String(form.get(name) ?? "").trim();
      if (value) next.set(name, convert ? convert(name, value) : value);
    }
    setParams(next);
  }
  return { params, filter, before, query, apply };
}

/** Newest and Older links of a listing at ``base``, keeping its ``filter``. */
export function Pager({
  base,
  filter,
  before,
  next,
}: {
  base: string;
  filter: URLSearchParams;
  before: string | null;
  next: number | null | undefined;
}) {
  const older = new URLSearchParams(filter);
  if (next) older.set("before_id", String(next));
  return (
    <nav className="pager" aria-label={`Pages of ${base.slice(1)}`}>
      {before && (
        <Link to={`${base}?${filter}`} className="button secondary">
          Newest
        </Link>
      )}
      {next ? (
        <Link to={`${base}?${older}`} className="button secondary">
          Older
        </Link>
      ) : null}
    </nav>
  );
}
