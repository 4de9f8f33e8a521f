// Structured data (JSON from a worker, an answer's value) shown as a person reads it:
// labelled fields and lists instead of braces and quotes. Everything is rendered as React
// text, never as HTML; only a report's `summary`, which is Markdown by contract, goes
// through the sanitizing Markdown renderer.
import { Accordion, Badge, List, Stack, Text } from "@mantine/core";

import { Markdown } from "./Markdown";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** `needsPlanning` → "Needs planning", `follow_ups` → "Follow ups". */
export function humanize(key: string): string {
  const words = key.replace(/[_-]+/g, " ").replace(/([a-z0-9])([A-Z])/g, "$1 $2").trim()
    .toLowerCase();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** `text` as a JSON object, or null when it is anything else (plain text, an array). */
export function jsonObject(text: string): Record<string, Json> | null {
  const trimmed = text.trim();
  if (!trimmed.startsWith("{") || !trimmed.endsWith("}")) return null;
  try {
    const value = JSON.parse(trimmed) as Json;
    return value && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

function isEmpty(value: Json): boolean {
  return value === null || value === "" || (Array.isArray(value) && value.length === 0)
    || (typeof value === "object" && value !== null && Object.keys(value).length === 0);
}

/** One JSON value: text, yes/no, a bulleted list, or labelled fields (nested as needed). */
export function Readable({ value }: { value: unknown }) {
  const json = value as Json;
  if (json === null || json === undefined) return <Text span inherit c="dimmed">none</Text>;
  if (typeof json === "boolean") return <Text span inherit>{json ? "yes" : "no"}</Text>;
  if (typeof json === "number") return <Text span inherit>{json.toLocaleString()}</Text>;
  if (typeof json === "string") return <Text span inherit style={{ whiteSpace: "pre-wrap" }}>{json}</Text>;
  if (Array.isArray(json)) {
    if (json.length === 0) return <Text span inherit c="dimmed">none</Text>;
    return (
      <List spacing={2} withPadding fz="inherit">
        {json.map((item, i) => <List.Item key={i}><Readable value={item} /></List.Item>)}
      </List>
    );
  }
  return (
    <Stack gap={4} className="readable">
      {Object.entries(json).map(([key, item]) => {
        const nested = typeof item === "object" && item !== null && !isEmpty(item);
        return (
          <div key={key}>
            <Text span inherit fw={600}>{humanize(key)}: </Text>
            {nested ? <div className="readable-nested"><Readable value={item} /></div>
              : <Readable value={item} />}
          </div>
        );
      })}
    </Stack>
  );
}

/** A reply's text: Markdown — or, when the process answered with a JSON report (a marvin
 * step's `{summary, result, needsPlanning, followUps}`), its summary as Markdown with the
 * rest as readable details under it. */
export function Reply({ text }: { text: string }) {
  const report = jsonObject(text);
  if (!report) return <Markdown text={text} />;
  const { summary, ...rest } = report;
  if (typeof summary !== "string") return <div data-testid="report"><Readable value={report} /></div>;
  const { followUps, needsPlanning, ...details } = rest;
  return (
    <Stack gap="xs" data-testid="report">
      <Markdown text={summary} />
      {needsPlanning === true && <Badge variant="light" color="orange">needs more planning</Badge>}
      {Array.isArray(followUps) && followUps.length > 0 && (
        <div>
          <Text size="sm" fw={600}>Suggested next steps</Text>
          <Readable value={followUps} />
        </div>
      )}
      {Object.values(details).some((v) => !isEmpty(v)) && (
        <Accordion chevronPosition="left" variant="filled">
          <Accordion.Item value="details">
            <Accordion.Control>Details</Accordion.Control>
            <Accordion.Panel><Readable value={details} /></Accordion.Panel>
          </Accordion.Item>
        </Accordion>
      )}
    </Stack>
  );
}
