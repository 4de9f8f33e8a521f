// Markdown from a model or a worker is untrusted: marked renders it, highlight.js colours
// code blocks, DOMPurify removes whatever could run (scripts, handlers, javascript: links).
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/common";
import { Marked } from "marked";
import { markedHighlight } from "marked-highlight";

const marked = new Marked(
  markedHighlight({
    emptyLangClass: "hljs",
    langPrefix: "hljs language-",
    highlight(code, lang) {
      const language = hljs.getLanguage(lang) ? lang : "plaintext";
      return hljs.highlight(code, { language }).value;
    },
  }),
  { gfm: true, breaks: true, async: false },
);

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  // An image the text gives no description is marked decorative for screen readers
  // (Markdown's ![description](url) gives one).
  if (node.tagName === "IMG" && !node.hasAttribute("alt")) node.setAttribute("alt", "");
  // Links open outside the app, without telling the target where they came from.
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

/** Sanitized HTML for `dangerouslySetInnerHTML`. */
export function renderMarkdown(text: string): string {
  return DOMPurify.sanitize(marked.parse(text) as string);
}
