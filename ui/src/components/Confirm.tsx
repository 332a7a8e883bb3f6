// A confirmation before an action that changes things: the browser's own modal <dialog>
// (focus kept inside, Escape closes it, the page behind inert), which needs no injected
// style the page's Content-Security-Policy would refuse.
import { useId, useRef, type ReactNode } from "react";

export function Confirm({
  trigger,
  title,
  children,
  action,
  onConfirm,
}: {
  trigger: string;
  title: string;
  children: ReactNode;
  action: string;
  onConfirm: () => void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  return (
    <>
      <button type="button" onClick={() => dialog.current?.showModal()}>
        {trigger}
      </button>
      <dialog ref={dialog} className="dialog" aria-labelledby={titleId}>
        <h2 id={titleId}>{title}</h2>
        {children}
        <div className="actions">
          <button type="button" className="secondary" onClick={() => dialog.current?.close()}>
            Keep as is
          </button>
          <button
            type="button"
            onClick={() => {
              dialog.current?.close();
              onConfirm();
            }}
          >
            {action}
          </button>
        </div>
      </dialog>
    </>
  );
}
