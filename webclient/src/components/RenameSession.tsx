import { Button, Modal, Stack, TextInput } from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { useState } from "react";

import { renameSession } from "../client";
import type { Session } from "../protocol";

/** The longest title the server takes (`session-rename`, docs/protocol.md "Titles"). */
const TITLE_MAX = 200;

/** *Rename* and its dialog for one session; the server's refusal shows under the field. */
export function RenameSession({ session }: { session: Session }) {
  const [opened, { open, close }] = useDisclosure();
  const [title, setTitle] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const start = () => {
    setTitle(session.title ?? "");
    setError(null);
    open();
  };
  const save = async () => {
    setBusy(true);
    const refused = await renameSession(session.id, title);
    setBusy(false);
    if (refused) setError(refused);
    else close();
  };
  return (
    <>
      <Button size="xs" variant="light" color="gray" onClick={start}>Rename</Button>
      <Modal opened={opened} onClose={close} title="Rename the session">
        <form onSubmit={(e) => { e.preventDefault(); void save(); }}>
          <Stack>
            <TextInput label="Title" value={title} data-autofocus maxLength={TITLE_MAX}
              error={error} onChange={(e) => setTitle(e.currentTarget.value)} />
            <Button type="submit" loading={busy} disabled={!title.trim()}>Save</Button>
          </Stack>
        </form>
      </Modal>
    </>
  );
}
