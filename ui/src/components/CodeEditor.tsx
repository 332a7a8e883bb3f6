// A code editor for scripts (CodeMirror 6): line numbers, highlighting per language, the
// usual keys; the text goes to the form through ``onChange``. It lives in a shadow root,
// where CodeMirror styles itself with constructed style sheets: in the page's document it
// would add <style> elements, which the Content-Security-Policy refuses.
import { javascript } from "@codemirror/lang-javascript";
import { python } from "@codemirror/lang-python";
import { HighlightStyle, StreamLanguage, syntaxHighlighting } from "@codemirror/language";
import { groovy } from "@codemirror/legacy-modes/mode/groovy";
import { shell } from "@codemirror/legacy-modes/mode/shell";
import { EditorView, basicSetup } from "codemirror";
import { tags } from "@lezer/highlight";
import { useEffect, useRef } from "react";

function language(name: string) {
  switch (name) {
    case "python":
      return python();
    case "node":
      return javascript();
    case "typescript":
      return javascript({ typescript: true });
    case "groovy":
      return StreamLanguage.define(groovy);
    default:
      return StreamLanguage.define(shell);
  }
}

/** The page's colours (custom properties reach into the shadow root). */
const THEME = EditorView.theme({
  "&": { minHeight: "12rem", backgroundColor: "var(--bg)", color: "var(--fg)" },
  ".cm-content": { caretColor: "var(--fg)", fontFamily: "ui-monospace, monospace" },
  ".cm-gutters": { backgroundColor: "var(--panel)", color: "var(--muted)", border: "none" },
  "&.cm-focused": { outline: "3px solid var(--focus)" },
  ".cm-activeLine, .cm-activeLineGutter": { backgroundColor: "transparent" },
});

/** Token colours from the page's variables, readable in both themes. */
const COLOURS = syntaxHighlighting(
  HighlightStyle.define([
    { tag: [tags.keyword, tags.operatorKeyword, tags.modifier], color: "var(--code-keyword)" },
    { tag: [tags.string, tags.special(tags.string), tags.regexp], color: "var(--code-string)" },
    { tag: [tags.comment, tags.lineComment, tags.blockComment], color: "var(--code-comment)" },
    { tag: [tags.number, tags.bool, tags.null, tags.atom], color: "var(--code-number)" },
    { tag: [tags.function(tags.variableName), tags.definition(tags.variableName)], color: "var(--code-name)" },
  ]),
);

export function CodeEditor({
  value,
  lang,
  label,
  onChange,
}: {
  value: string;
  lang: string;
  label: string;
  onChange: (text: string) => void;
}) {
  const host = useRef<HTMLDivElement>(null);
  const changed = useRef(onChange);
  changed.current = onChange;
  useEffect(() => {
    if (!host.current) return;
    const shadow = host.current.shadowRoot ?? host.current.attachShadow({ mode: "open" });
    shadow.replaceChildren();
    const parent = document.createElement("div");
    shadow.append(parent);
    const view = new EditorView({
      doc: value,
      parent,
      root: shadow,
      extensions: [
        basicSetup,
        THEME,
        COLOURS,
        language(lang),
        EditorView.contentAttributes.of({ "aria-label": label }),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) changed.current(update.state.doc.toString());
        }),
      ],
    });
    return () => view.destroy();
    // the editor keeps its own text; a new language makes a new editor
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [lang, label]);
  return <div className="editor" ref={host} />;
}
