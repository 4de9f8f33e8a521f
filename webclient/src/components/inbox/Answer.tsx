// An Inbox answer as a person reads it — "Approved", "Chose PostgreSQL", the order by the
// items' labels — in the item's view and in the chat line that told the asking process.
import { Badge, Code, Group, List, Paper, Stack, Text } from "@mantine/core";

import type { InboxItem, Outcome } from "../../protocol";
import { useStore } from "../../store";
import { jsonObject, Readable } from "../Readable";

/** What `inbox-answer` stored (`null`: the item was dismissed unanswered). */
export interface AnswerData {
  outcome: Outcome;
  value?: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  reason?: string | null;
  answeredBy?: string;
}

/** Who answered, for "… by you": the answering user, or the LOW item's own default. */
export function answeredBy(by: string | undefined, me: string | undefined): string | null {
  if (!by) return null;
  if (by === "system:auto-default") return "automatically, with its default";
  return by === me ? "by you" : `by ${by}`;
}

function label(entries: unknown, id: string, key: "id" | "value"): string {
  const found = Array.isArray(entries)
    ? entries.find((e) => e && typeof e === "object" && e[key] === id) : undefined;
  return typeof found?.label === "string" ? found.label : id;
}

/** The answer of an item of `type`; `item` (when this tab has it) gives the labels of its
 * options and of the entries it ordered. */
export function AnswerView({ type, answer, item }: {
  type: string; answer: AnswerData | null; item?: InboxItem;
}) {
  if (answer === null) return <Text>Dismissed without an answer</Text>;
  if (answer.outcome !== "DECIDED") {
    return <Text>{answer.outcome === "INSUFFICIENT_INFO" ? "I lack information" : "I cannot decide"}
      : {answer.reason}</Text>;
  }
  const value = answer.value ?? {};
  switch (type) {
    case "APPROVAL":
      return <Text fw={500}>{value.approved ? "Approved" : "Declined"}</Text>;
    case "DECISION":
      return (
        <Stack gap={2}>
          {value.chosen && <Text fw={500}>Chose {label(item?.payload?.options, value.chosen, "value")}</Text>}
          {value.freeText && <Text style={{ whiteSpace: "pre-wrap" }}>
            {value.chosen ? "And wrote: " : "Wrote: "}“{value.freeText}”</Text>}
        </Stack>
      );
    case "FEEDBACK":
      return <Text style={{ whiteSpace: "pre-wrap" }}>“{value.text}”</Text>;
    case "ORDERING":
      return (
        <Stack gap={2}>
          <Text fw={500}>In this order:</Text>
          <List type="ordered" size="sm" withPadding>
            {(value.orderedIds as string[] ?? []).map((id) => (
              <List.Item key={id}>{label(item?.payload?.items, id, "id")}</List.Item>))}
          </List>
        </Stack>
      );
    case "STRUCTURE_EDIT":
      return <Stack gap={2}><Text fw={500}>Set to:</Text><Readable value={value.value} /></Stack>;
    default:
      return <Readable value={value} />;
  }
}

/** The chat's line of an answer that reached the asking process (`<inbox-answer itemId
 * type title>` with the answer's JSON, or a note that it was dismissed): the item's title
 * and type, then the answer in words. */
export function InboxAnswerCard({ attrs, text }: { attrs: Record<string, string>; text: string }) {
  const me = useStore((s) => s.welcome?.userId);
  const item = useStore((s) => (attrs.itemId ? s.inbox[attrs.itemId] : undefined));
  const parsed = jsonObject(text);
  const answer = parsed && typeof parsed.outcome === "string" ? parsed as unknown as AnswerData
    : null;
  const by = answeredBy(answer?.answeredBy, me);
  return (
    <Paper withBorder p="sm" radius="md" bg="gray.0" data-role="event" data-tag="inbox-answer">
      <Group gap="xs" mb={4}>
        <Text size="sm" fw={500}>Inbox answer</Text>
        {attrs.title && <Code>{attrs.title}</Code>}
        {attrs.type && <Badge size="sm" variant="light">{attrs.type.replace("_", " ")}</Badge>}
      </Group>
      {answer || !text.trim() ? <AnswerView type={attrs.type ?? ""} answer={answer} item={item} />
        : <Text style={{ whiteSpace: "pre-wrap" }}>{text}</Text>}
      {by && <Text size="xs" c="dimmed" mt={2}>Answered {by}</Text>}
    </Paper>
  );
}
