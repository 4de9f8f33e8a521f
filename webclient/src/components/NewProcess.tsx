import { Button, Modal, Select, Stack, Textarea, TextInput } from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { useEffect, useState } from "react";

import { createProcess, processChoices } from "../client";
import { useStore } from "../store";

/** Start a process in the bound session (`process-create`): a recipe (`recipe-list`) or
 * an engine (`think-engines-list`), its goal and an optional name. The new process is
 * focused, so what is typed next goes to it. */
export function NewProcess() {
  const sessionId = useStore((s) => s.sessionId);
  const [opened, { open, close }] = useDisclosure(false);
  const [choices, setChoices] = useState<{ recipes: string[]; engines: string[] }>(
    { recipes: [], engines: [] });
  const [what, setWhat] = useState<string | null>(null);
  const [goal, setGoal] = useState("");
  const [name, setName] = useState("");
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (opened) void processChoices().then(setChoices);
  }, [opened]);
  if (!sessionId) return null;
  const submit = async () => {
    if (!what || !goal.trim()) return;
    setBusy(true);
    const [kind, value] = what.split(":", 2);
    const ok = await createProcess(kind === "engine" ? { engine: value } : { recipe: value },
      goal.trim(), name.trim());
    setBusy(false);
    if (ok) {
      close();
      setGoal("");
      setName("");
    }
  };
  return (
    <>
      <Button size="compact-sm" variant="light" onClick={open}>New process</Button>
      <Modal opened={opened} onClose={close} title="New process">
        <form onSubmit={(e) => { e.preventDefault(); void submit(); }}>
          <Stack>
            <Select label="Recipe or engine" searchable required value={what} onChange={setWhat}
              placeholder="Pick one" data={[
                { group: "Recipes", items: choices.recipes.map((r) => ({ value: `recipe:${r}`, label: r })) },
                { group: "Engines", items: choices.engines.map((e) => ({ value: `engine:${e}`, label: e })) },
              ]} />
            <Textarea label="Goal" required autosize minRows={2} maxRows={8} value={goal}
              onChange={(e) => setGoal(e.currentTarget.value)} />
            <TextInput label="Name" placeholder="optional" value={name}
              onChange={(e) => setName(e.currentTarget.value)} />
            <Button type="submit" loading={busy} disabled={!what || !goal.trim()}>Start</Button>
          </Stack>
        </form>
      </Modal>
    </>
  );
}
