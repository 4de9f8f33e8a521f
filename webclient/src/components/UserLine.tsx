import { Paper, Text } from "@mantine/core";

import type { ChatLine } from "../protocol";
import { useStore, type State } from "../store";

/** Who wrote a `user` line that is not the user's own: another process that sent it
 * (`meta.fromProcess`: Arthur relaying to a worker), or the parent that gave a worker its
 * goal (the line a process starts with, equal to its goal); null for the user. */
function sender(s: State, line: ChatLine): string | null {
  const name = (id: string) => id === s.chatProcessId ? "Arthur" : s.processes[id]?.name || id;
  if (typeof line.meta.fromProcess === "string") return `From ${name(line.meta.fromProcess)}`;
  const process = s.processes[line.processId];
  if (!line.sourceMessageId && process?.parentProcessId && line.content === process.goal) {
    return `Goal from ${name(process.parentProcessId)}`;
  }
  return null;
}

/** A `user` line: the user's own on the right, one a process wrote on the left, named. */
export function UserLine({ line }: { line: ChatLine }) {
  const from = useStore((s) => sender(s, line));
  return (
    <Paper p="sm" radius="md" bg={from ? "gray.1" : "blue.0"} ml={from ? undefined : "auto"}
      maw={{ base: "100%", sm: "85%" }} data-role="user" data-from={from ? "process" : "user"}>
      <Text size="xs" c="dimmed">{from ?? "You"}</Text>
      <Text style={{ whiteSpace: "pre-wrap" }}>{line.content}</Text>
    </Paper>
  );
}
