// A button that calls the API and refreshes what it changed; its failure is shown beside it.
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { Failure } from "./States";

export function Action({
  label,
  name,
  run,
  refresh,
  className = "secondary",
}: {
  label: string;
  /** The accessible name, when the label alone would be ambiguous in a table. */
  name?: string;
  run: () => Promise<unknown>;
  refresh: string[];
  className?: string;
}) {
  const client = useQueryClient();
  const act = useMutation({
    mutationFn: run,
    onSettled: () => void client.invalidateQueries({ queryKey: refresh }),
  });
  return (
    <>
      <button
        type="button"
        className={className}
        aria-label={name}
        disabled={act.isPending}
        onClick={() => act.mutate()}
      >
        {label}
      </button>
      {act.isError && <Failure error={act.error} />}
    </>
  );
}
