import { useMemo } from "react";

import { renderMarkdown } from "../markdown";

/** Untrusted Markdown, rendered and sanitized (markdown.ts). */
export function Markdown({ text }: { text: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div className="markdown" dangerouslySetInnerHTML={{ __html: html }} />;
}
