import { Button, Group } from "@mantine/core";
import { useState } from "react";

import { sendMessage } from "../client";

/** What a line suggests saying (`meta.suggestions`, e.g. the demo's welcome): each a
 * button that sends it as the user's message to the process shown, as chat UIs do. */
export function Suggestions({ phrases }: { phrases: unknown[] }) {
  const [sending, setSending] = useState(false);
  const say = async (phrase: string) => {
    setSending(true);
    await sendMessage(phrase);
    setSending(false);
  };
  return (
    <Group gap={6} mt="xs" role="group" aria-label="Suggestions" data-testid="suggestions">
      {phrases.filter((p): p is string => typeof p === "string").map((phrase) => (
        <Button key={phrase} size="compact-sm" variant="light" radius="xl" disabled={sending}
          onClick={() => void say(phrase)}>{phrase}</Button>
      ))}
    </Group>
  );
}
