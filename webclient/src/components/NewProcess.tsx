import { Button, JsonInput, Modal, Select, Stack, Textarea, TextInput } from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { useEffect, useState } from "react";

import { createProcess, type ProcessChoices, processChoices } from "../client";
import { useStore } from "../store";

/** A JSON object, or `undefined` for an empty field; `null` when it is no object. */
function paramsOf(text: string): Record<string, unknown> | undefined | null {
  if (!text.trim()) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value)
      ? value as Record<string, unknown> : null;
  } catch {
    return null;
  }
}

/** Start a process in the bound session (`process-create`): a recipe (`recipe-list`) or
 * an engine (`think-engines-list`), its goal, an optional name and engine params (a JSON
 * object, e.g. vogon's `{"strategy": "draft-review"}`), and for marvin a workflow template
 * (`template-list`). The new process is
 * focused, so what is typed next goes to it. */
export function NewProcess() {
  const sessionId = useStore((s) => s.sessionId);
  const [opened, { open, close }] = useDisclosure(false);
  const [choices, setChoices] = useState<ProcessChoices>(
    { recipes: [], engines: [], templates: [] });
  const [what, setWhat] = useState<string | null>(null);
  const [goal, setGoal] = useState("");
  const [name, setName] = useState("");
  const [params, setParams] = useState("");
  const [template, setTemplate] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    if (opened) void processChoices().then(setChoices);
  }, [opened]);
  if (!sessionId) return null;
  const [kind, value] = what ? what.split(":", 2) : ["", ""];
  const engine = kind === "engine" ? value : choices.recipes.find((r) => r.name === value)?.engine;
  const marvin = engine === "marvin" || engine === "deep-think";
  const submit = async () => {
    const parsed = paramsOf(params);
    if (!what || !goal.trim() || parsed === null) return;
    setBusy(true);
    const ok = await createProcess(kind === "engine" ? { engine: value } : { recipe: value },
      goal.trim(), name.trim(), parsed, (marvin && template) || undefined);
    setBusy(false);
    if (ok) {
      close();
      setGoal("");
      setName("");
      setParams("");
      setTemplate(null);
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
                { group: "Recipes", items: choices.recipes.map((r) => ({ value: `recipe:${r.name}`, label: r.name })) },
                { group: "Engines", items: choices.engines.map((e) => ({ value: `engine:${e}`, label: e })) },
              ]} />
            {marvin && choices.templates.length > 0 && (
              <Select label="Workflow template" placeholder="none: marvin plans the tree"
                clearable value={template} onChange={setTemplate} data={choices.templates} />)}
            <Textarea label="Goal" required autosize minRows={2} maxRows={8} value={goal}
              onChange={(e) => setGoal(e.currentTarget.value)} />
            <TextInput label="Name" placeholder="optional" value={name}
              onChange={(e) => setName(e.currentTarget.value)} />
            <JsonInput label="Params" placeholder='optional, e.g. {"strategy": "draft-review"}'
              autosize minRows={2} maxRows={8} value={params} onChange={setParams}
              error={paramsOf(params) === null ? "Params must be a JSON object" : undefined} />
            <Button type="submit" loading={busy}
              disabled={!what || !goal.trim() || paramsOf(params) === null}>Start</Button>
          </Stack>
        </form>
      </Modal>
    </>
  );
}
