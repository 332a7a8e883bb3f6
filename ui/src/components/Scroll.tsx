// A wide table's frame: scrolls sideways on a narrow screen, and can be scrolled with the
// keyboard (focusable, named for screen readers).
import type { ReactNode } from "react";

export function Scroll({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div className="scroll" tabIndex={0} role="region" aria-label={label}>
      {children}
    </div>
  );
}
