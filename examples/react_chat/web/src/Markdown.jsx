// Markdown, sanitised: marked renders it (raw HTML in the text is shown as text, not parsed) and
// DOMPurify cleans what marked made; links open in a new tab without access to this page.
import DOMPurify from "dompurify";
import { Marked } from "marked";
import { useMemo } from "react";

const escapeHtml = (text) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const marked = new Marked({ gfm: true, async: false });
marked.use({ renderer: { html: ({ text }) => escapeHtml(text) } });

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

export function Markdown({ text }) {
  const html = useMemo(
    () => DOMPurify.sanitize(marked.parse(text), { FORBID_ATTR: ["style"], FORBID_TAGS: ["style", "form", "input"] }),
    [text],
  );
  return <div className="md" dangerouslySetInnerHTML={{ __html: html }} />;
}
