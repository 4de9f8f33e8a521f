// The renderers of the simple asks and of the three outputs. Each ask calls `onAnswer`
// with the type's answer value (docs/protocol.md, The Inbox).
import {
  Anchor, Button, Group, Image, Radio, Stack, Text, Textarea,
} from "@mantine/core";
import { useState } from "react";

import type { InboxItem } from "../../protocol";
import { Markdown } from "../Markdown";

type Answer = (value: object) => void;

/** APPROVAL: approve or decline; the default is the filled button. */
export function Approval({ item, busy, onAnswer }: { item: InboxItem; busy: boolean; onAnswer: Answer }) {
  const def = item.payload.default as "yes" | "no" | undefined;
  const choice = (yes: boolean) => {
    const isDefault = def === (yes ? "yes" : "no");
    return (
      <Button variant={isDefault ? "filled" : "default"} color={yes ? "green" : "red"}
        loading={busy} data-default={isDefault || undefined}
        onClick={() => onAnswer({ approved: yes })}>
        {yes ? "Approve" : "Decline"}{isDefault ? " (default)" : ""}
      </Button>
    );
  };
  return <Group>{choice(true)}{choice(false)}</Group>;
}

interface Option { value: string; label: string; description?: string }

/** DECISION: one of the options (the default preselected and marked), plus free text
 * when the item allows it — alone, or with a choice. */
export function Decision({ item, busy, onAnswer }: { item: InboxItem; busy: boolean; onAnswer: Answer }) {
  const options = item.payload.options as Option[];
  const def = item.payload.default as string | undefined;
  const [chosen, setChosen] = useState<string | null>(def ?? null);
  const [free, setFree] = useState("");
  const allowFree = Boolean(item.payload.allowFreeText);
  const submit = () => onAnswer({
    ...(chosen ? { chosen } : {}), ...(allowFree && free.trim() ? { freeText: free } : {}),
  });
  return (
    <Stack gap="sm">
      <Radio.Group value={chosen} onChange={setChosen} label="Choose one">
        <Stack gap="xs" mt="xs">
          {options.map((o) => (
            <Radio key={o.value} value={o.value}
              label={o.label + (o.value === def ? " (default)" : "")}
              description={o.description} />
          ))}
        </Stack>
      </Radio.Group>
      {allowFree && (
        <Group align="end">
          <Textarea label="Or in your own words" value={free} autosize minRows={2}
            onChange={(e) => setFree(e.currentTarget.value)} style={{ flex: 1 }} />
          {chosen && <Button variant="subtle" onClick={() => setChosen(null)}>Clear choice</Button>}
        </Group>
      )}
      <Group>
        <Button loading={busy} disabled={!chosen && !free.trim()} onClick={submit}>Answer</Button>
      </Group>
    </Stack>
  );
}

/** FEEDBACK: free text with the item's placeholder and a length counter against its
 * `maxLength`. */
export function Feedback({ item, busy, onAnswer }: { item: InboxItem; busy: boolean; onAnswer: Answer }) {
  const max = item.payload.maxLength as number | undefined;
  const [text, setText] = useState("");
  const over = max !== undefined && text.length > max;
  return (
    <Stack gap="xs">
      <Textarea label="Your feedback" placeholder={item.payload.placeholder} value={text}
        autosize minRows={3} onChange={(e) => setText(e.currentTarget.value)}
        error={over ? `At most ${max} characters` : undefined} />
      <Group justify="space-between">
        <Text size="sm" c={over ? "red" : "dimmed"} data-testid="length-counter" aria-live="polite">
          {text.length}{max !== undefined ? ` / ${max}` : ""} characters
        </Text>
        <Button loading={busy} disabled={over || !text.trim()}
          onClick={() => onAnswer({ text })}>Send feedback</Button>
      </Group>
    </Stack>
  );
}

/** A signed attachment link as a same-origin path: the web client is served by the
 * gateway that signed it, and the absolute form names the server's configured base URL,
 * which need not be how this browser reached it (e.g. `serve` on port 0). */
export function attachmentPath(url: string | undefined): string | undefined {
  if (!url) return undefined;
  const parsed = new URL(url, window.location.href);
  return parsed.pathname + parsed.search;
}

function size(bytes: number | undefined): string {
  if (bytes === undefined) return "";
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`;
}

/** OUTPUT_TEXT, OUTPUT_IMAGE, OUTPUT_DOCUMENT: shown, nothing to answer. */
export function Output({ item }: { item: InboxItem }) {
  const src = attachmentPath(item.payload.url);
  switch (item.type) {
    case "OUTPUT_TEXT":
      return <div data-testid="output-text"><Markdown text={item.body ?? ""} /></div>;
    case "OUTPUT_IMAGE":
      return (
        <Stack gap="xs">
          {src ? <Image src={src} alt={item.payload.caption ?? item.title} fit="contain"
            maw={480} radius="sm" data-testid="output-image" className="pixelated" />
            : <Text c="dimmed">The image is not available.</Text>}
          {item.payload.caption && <Text size="sm" c="dimmed">{item.payload.caption}</Text>}
        </Stack>
      );
    default:
      return src ? (
        <Group>
          <Anchor href={src} download={item.payload.filename} data-testid="output-document">
            Download {item.payload.filename ?? "the document"}
          </Anchor>
          <Text size="sm" c="dimmed">{item.payload.mimeType} {size(item.payload.sizeBytes)}</Text>
        </Group>
      ) : <Text c="dimmed">The document is not available.</Text>;
  }
}
