// A confirmation before an action that changes things (Radix's accessible dialog).
import * as Dialog from "@radix-ui/react-dialog";
import { useState, type ReactNode } from "react";

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
  const [open, setOpen] = useState(false);
  return (
    <Dialog.Root open={open} onOpenChange={setOpen}>
      <Dialog.Trigger asChild>
        <button type="button">{trigger}</button>
      </Dialog.Trigger>
      <Dialog.Portal>
        <Dialog.Overlay className="overlay" />
        <Dialog.Content className="dialog">
          <Dialog.Title>{title}</Dialog.Title>
          <Dialog.Description asChild>
            <div>{children}</div>
          </Dialog.Description>
          <div className="actions">
            <Dialog.Close asChild>
              <button type="button" className="secondary">
                Keep as is
              </button>
            </Dialog.Close>
            <button
              type="button"
              onClick={() => {
                setOpen(false);
                onConfirm();
              }}
            >
              {action}
            </button>
          </div>
        </Dialog.Content>
      </Dialog.Portal>
    </Dialog.Root>
  );
}
