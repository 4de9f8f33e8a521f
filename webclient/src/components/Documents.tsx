import {
  Alert, Badge, Button, Group, Modal, Paper, Progress, Stack, Text, Title,
} from "@mantine/core";
import { useEffect, useMemo, useRef, useState } from "react";

import {
  ACCEPTED, deleteDocument, dismissUpload, loadDocuments, meaning, shownProject, uploadFiles,
} from "../documents";
import type { DocumentStatus, DocumentView } from "../protocol";
import { useStore, type Upload } from "../store";

const STATUS: Record<DocumentStatus, [string, string]> = {
  // Shades dark enough for white text (WCAG AA), as the worker cards' pills.
  PENDING: ["gray.7", "pending"],
  INDEXING: ["blue.8", "indexing"],
  READY: ["teal.9", "ready"],
  FAILED: ["red.9", "failed"],
};

/** Bytes as a person reads them: `812 B`, `12.4 KiB`, `3.1 MiB`. */
export function humanSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

function plural(n: number, one: string): string {
  return `${n} ${one}${n === 1 ? "" : "s"}`;
}

/** The Documents tab: the knowledge documents of the bound session's project ("default"
 * with none bound) — a drop zone and a file picker that upload (a progress bar per file),
 * then the list by name with each document's size, passages, pages, status and update
 * time, kept live by the pushes; a refused upload and a FAILED document say what their
 * error code means and what to do. Names and error texts are data: drawn as text only. */
export function Documents() {
  const project = useStore(shownProject);
  const welcome = useStore((s) => s.welcome);
  const documents = useStore((s) => s.documents);
  const uploads = useStore((s) => s.uploads);
  const [deleting, setDeleting] = useState<DocumentView | null>(null);

  // The list again on opening, for another project, and after each welcome (pushes may
  // have been missed while disconnected).
  useEffect(() => { void loadDocuments(project); }, [project, welcome]);
  const shown = useMemo(() => Object.values(documents)
    .filter((d) => d.projectId === project)
    .sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id)),
  [documents, project]);

  return (
    <Stack gap="sm" data-testid="documents" className="documents">
      <div>
        <Title order={2} size="h4">Documents of project “{project}”</Title>
        <Text size="sm" c="dimmed">
          Arthur searches them for what you ask and names the passages he used under his reply.
        </Text>
      </div>
      <DropZone project={project} />
      {uploads.filter((u) => u.projectId === project).map((u) => (
        <UploadRow key={u.key} upload={u} />))}
      <Stack gap="xs" role="list" aria-label="Documents" data-testid="document-list">
        {shown.length === 0 && <Text c="dimmed" size="sm">No documents in this project yet.</Text>}
        {shown.map((d) => (
          <DocumentRow key={d.id} doc={d} onDelete={() => setDeleting(d)} />))}
      </Stack>
      <ConfirmDelete doc={deleting} onClose={() => setDeleting(null)} />
    </Stack>
  );
}

/** Files dropped on it or picked with its button are uploaded. The picker is the native
 * `<input type=file>` behind a button, so keyboard and screen reader users reach it. */
function DropZone({ project }: { project: string }) {
  const input = useRef<HTMLInputElement>(null);
  const [over, setOver] = useState(false);
  const take = (files: FileList | null) => {
    if (files && files.length > 0) uploadFiles(project, [...files]);
  };
  return (
    <Paper p="md" radius="md" className="drop-zone" data-over={over || undefined}
      data-testid="drop-zone" role="group" aria-label="Add documents"
      onDragEnter={(e) => { e.preventDefault(); setOver(true); }}
      onDragOver={(e) => { e.preventDefault(); e.dataTransfer.dropEffect = "copy"; }}
      onDragLeave={(e) => {
        if (!e.currentTarget.contains(e.relatedTarget as Node | null)) setOver(false);
      }}
      onDrop={(e) => {
        e.preventDefault();
        setOver(false);
        take(e.dataTransfer.files);
      }}>
      <Group justify="center" gap="sm">
        {/* a phone has nothing to drag files from */}
        <Text size="sm" visibleFrom="sm">Drop files here, or</Text>
        <Button size="compact-md" onClick={() => input.current?.click()}>Choose files</Button>
      </Group>
      <Text size="xs" c="dimmed" ta="center" mt={6}>
        Text, Markdown, HTML, PDF or source code; up to 20 MiB each. A file with the name of a
        document replaces it.
      </Text>
      <input ref={input} type="file" multiple hidden accept={ACCEPTED}
        data-testid="document-files" aria-label="Files to add"
        onChange={(e) => {
          take(e.currentTarget.files);
          e.currentTarget.value = "";  // the same file may be picked again
        }} />
    </Paper>
  );
}

/** An error code's meaning (what to do next) with the server's own words under it. */
function ErrorText({ code, message }: { code: string; message: string | null | undefined }) {
  return (
    <>
      <Text size="sm">{meaning(code)}</Text>
      {message && <Text size="xs" c="dimmed" mt={2}>{code}: {message}</Text>}
    </>
  );
}

function UploadRow({ upload }: { upload: Upload }) {
  const percent = Math.round(upload.sent * 100);
  return (
    <Paper p="sm" withBorder data-testid="upload" data-name={upload.name}
      data-state={upload.error ? "failed" : "sending"}>
      <Group justify="space-between" wrap="nowrap" gap="xs">
        <Text size="sm" fw={500} className="document-name">{upload.name}</Text>
        <Text size="xs" c="dimmed" style={{ flexShrink: 0 }}>{humanSize(upload.size)}</Text>
      </Group>
      {upload.error ? (
        <Alert color="red" mt={6} p="xs" role="alert" title="Not added"
          withCloseButton closeButtonLabel={`Dismiss ${upload.name}`}
          onClose={() => dismissUpload(upload.key)}>
          <ErrorText code={upload.error.code} message={upload.error.message} />
        </Alert>
      ) : (
        <Group gap="xs" mt={6} wrap="nowrap">
          <Progress value={percent} style={{ flex: 1 }} aria-label={`Uploading ${upload.name}`} />
          <Text size="xs" c="dimmed">{percent < 100 ? `${percent}%` : "Sent, storing…"}</Text>
        </Group>
      )}
    </Paper>
  );
}

function DocumentRow({ doc, onDelete }: { doc: DocumentView; onDelete(): void }) {
  const [color, label] = STATUS[doc.status];
  // Passages once there are any (a new or failed document has none to count).
  const details = [humanSize(doc.size),
    ...(doc.status === "READY" || doc.chunkCount > 0 ? [plural(doc.chunkCount, "passage")] : []),
    ...(doc.pages ? [plural(doc.pages, "page")] : [])];
  return (
    <Paper p="sm" withBorder role="listitem" data-testid="document-row" data-name={doc.name}
      data-status={doc.status}>
      <Group justify="space-between" wrap="nowrap" gap="xs" align="flex-start">
        <Stack gap={2} style={{ minWidth: 0 }}>
          <Group gap={8} wrap="nowrap" align="flex-start">
            <Text size="sm" fw={500} className="document-name">{doc.name}</Text>
            <Badge size="sm" color={color} data-testid="document-status" mt={1}
              style={{ flexShrink: 0 }}>{label}</Badge>
          </Group>
          <Text size="xs" c="dimmed">
            <span data-testid="document-details">{details.join(" · ")}</span>
            {" · updated "}<time dateTime={doc.updatedAt}>{new Date(doc.updatedAt).toLocaleString(
              undefined, { dateStyle: "medium", timeStyle: "short" })}</time>
            {doc.version > 1 ? ` · version ${doc.version}` : ""}
          </Text>
        </Stack>
        <Button size="compact-sm" variant="subtle" color="red" onClick={onDelete}
          aria-label={`Delete ${doc.name}`} style={{ flexShrink: 0 }}>Delete</Button>
      </Group>
      {doc.status === "FAILED" && (
        <Alert color="red" mt={6} p="xs" title="Could not be indexed">
          <ErrorText code={doc.errorCode ?? "unreadable_document"} message={doc.error} />
        </Alert>
      )}
    </Paper>
  );
}

/** Asks before deleting: the passages are no longer found and the file is removed. */
function ConfirmDelete({ doc, onClose }: { doc: DocumentView | null; onClose(): void }) {
  const [busy, setBusy] = useState(false);
  const [refused, setRefused] = useState<string | null>(null);
  useEffect(() => setRefused(null), [doc]);
  const confirm = async () => {
    if (!doc) return;
    setBusy(true);
    const error = await deleteDocument(doc);
    setBusy(false);
    if (error === null) onClose();
    else setRefused(error);
  };
  return (
    <Modal opened={doc !== null} onClose={onClose} title="Delete the document?" centered>
      <Text size="sm" className="document-name">{doc?.name}</Text>
      <Text size="sm" c="dimmed" mt="xs">
        Its passages will no longer be found and its file is removed. This cannot be undone.
      </Text>
      {refused && <Alert color="red" mt="sm" p="xs" role="alert">{refused}</Alert>}
      <Group justify="flex-end" mt="md">
        <Button variant="default" onClick={onClose}>Cancel</Button>
        <Button color="red" loading={busy} onClick={() => void confirm()}>Delete</Button>
      </Group>
    </Modal>
  );
}
