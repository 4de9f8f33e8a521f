// A project's knowledge documents (docs/protocol.md "Documents"): the list read with
// `document-list`, kept live by the user's `document-updated` / `document-deleted` pushes,
// uploads sent to the REST route with XMLHttpRequest (the one browser API that reports an
// upload's progress), and deletes. Views call these and read `documents` / `uploads`.
import { storedToken } from "./auth";
import { request, tryRequest } from "./client";
import type { DocumentView, Push } from "./protocol";
import { set, type State, type Upload } from "./store";

/** The server's cap on one file (docs/configuration.md "Knowledge"): a larger file is
 * refused here, before its bytes are sent, with the code the server would answer. */
export const MAX_DOCUMENT_BYTES = 20 * 1024 * 1024;

/** What the file picker offers (every format the server reads; a dropped file of another
 * type is sent all the same, and the server's refusal is shown). */
export const ACCEPTED = [
  ".txt", ".text", ".log", ".csv", ".tsv", ".rst", ".md", ".markdown", ".mdown", ".mkd",
  ".html", ".htm", ".xhtml", ".pdf", ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts",
  ".tsx", ".go", ".rs", ".java", ".kt", ".kts", ".scala", ".swift", ".c", ".h", ".cc", ".cpp",
  ".cxx", ".hpp", ".hh", ".cs", ".rb", ".php", ".sh", ".bash", ".zsh", ".sql", ".yaml", ".yml",
  ".toml", ".json", ".ini", ".cfg", ".xml", ".css", ".scss", ".lua", ".r", ".pl", ".proto",
  ".graphql", "text/plain", "text/markdown", "text/html", "application/pdf",
].join(",");

/** What an error's stable code means for the user, and what to do next. */
const MEANING: Record<string, string> = {
  document_too_large: "The file is larger than the 20 MiB one document may have. Split it "
    + "into smaller files, or save only its text (.txt or .md), and add those.",
  unsupported_document: "This type of file cannot be read. Add plain text, Markdown, HTML, "
    + "PDF or source code — or save the file in one of these formats first.",
  unreadable_document: "The file could not be read: it is corrupt, encrypted, has no text "
    + "(a scanned PDF: there is no OCR) or passes a bound. Export it again, or as text, and "
    + "add it again.",
  project_knowledge_full: "This project holds as many documents (500, or 500 MiB) as it may. "
    + "Delete documents it no longer needs, then add this one again.",
  tenant_knowledge_full: "Your organisation's documents take all the space it has (2 GiB "
    + "over all projects). Delete documents in any project, or ask an administrator.",
  invalid_input: "The server refused the name or the form. Rename the file (a shorter name, "
    + "no control characters) and add it again.",
  not_found: "The project was not found. Open a session of an existing project and try again.",
  unauthorized: "The server no longer accepts your sign-in. Sign out and in again.",
  network: "The upload was cut off before the server answered. Check the connection and "
    + "add the file again.",
};

/** The user-facing meaning of an error code (a generic one for codes not listed). */
export function meaning(code: string): string {
  return MEANING[code] ?? "The server could not take the file. Try again later.";
}

/** Merge documents read or pushed: a newer `version` wins, and within one version the later
 * `updatedAt` (a list read before a push may answer after it). */
export function mergeDocuments(documents: DocumentView[]): void {
  set((s) => {
    const next = { ...s.documents };
    for (const doc of documents) {
      const held = next[doc.id];
      if (!held || doc.version > held.version
          || (doc.version === held.version && doc.updatedAt >= held.updatedAt)) {
        next[doc.id] = doc;
      }
    }
    return { documents: next };
  });
}

function forget(documentId: string): void {
  set((s) => {
    const { [documentId]: _gone, ...rest } = s.documents;
    return { documents: rest };
  });
}

/** The project's documents as the server has them (the truth: pushes missed while away are
 * made good), replacing what was held of that project. */
export async function loadDocuments(projectId: string): Promise<void> {
  const answer = await request("document-list", { projectId }, true);
  if (!answer) return;
  set((s) => ({
    documents: Object.fromEntries([
      ...Object.entries(s.documents).filter(([, d]) => d.projectId !== projectId),
      ...answer.documents.map((d) => [d.id, d] as const),
    ]),
  }));
}

export function onDocumentPush(
  frame: Extract<Push, { type: "document-updated" | "document-deleted" }>,
): void {
  if (frame.type === "document-deleted") forget(frame.data.document.id);
  else mergeDocuments([frame.data.document]);
}

/** Delete a document (its chunks are no longer found); the refusal's message, or null. */
export async function deleteDocument(doc: DocumentView): Promise<string | null> {
  const answer = await tryRequest("document-delete",
    { projectId: doc.projectId, documentId: doc.id });
  if (!answer.ok) return answer.message;
  forget(doc.id);
  return null;
}

function patchUpload(key: string, change: Partial<Upload>): void {
  set((s) => ({ uploads: s.uploads.map((u) => u.key === key ? { ...u, ...change } : u) }));
}

/** Forget a finished upload's row (a failed one, once read). */
export function dismissUpload(key: string): void {
  set((s) => ({ uploads: s.uploads.filter((u) => u.key !== key) }));
}

/** Send each file to `POST /projects/<project>/documents`, each with its own progress row.
 * A file the server took leaves its row for the list, where its status follows the pushes;
 * a refused one keeps its row with the error. */
export function uploadFiles(projectId: string, files: File[]): void {
  for (const file of files) {
    const key = crypto.randomUUID();
    set((s) => ({ uploads: [...s.uploads, {
      key, projectId, name: file.name, size: file.size, sent: 0, error: null,
    }] }));
    if (file.size > MAX_DOCUMENT_BYTES) {
      patchUpload(key, { error: { code: "document_too_large",
        message: `the file is ${file.size} bytes; one document may have 20 MiB` } });
      continue;
    }
    send(projectId, file, key);
  }
}

function send(projectId: string, file: File, key: string): void {
  const form = new FormData();
  form.append("file", file, file.name);
  const xhr = new XMLHttpRequest();
  xhr.open("POST", `/projects/${encodeURIComponent(projectId)}/documents`);
  xhr.setRequestHeader("Authorization", `Bearer ${storedToken() ?? ""}`);
  xhr.responseType = "json";
  xhr.upload.onprogress = (e) => {
    if (e.lengthComputable) patchUpload(key, { sent: e.loaded / e.total });
  };
  xhr.onload = () => {
    const body = xhr.response as
      { document?: DocumentView; code?: string; message?: string } | null;
    if (xhr.status >= 200 && xhr.status < 300 && body?.document) {
      mergeDocuments([body.document]);
      dismissUpload(key);
      return;
    }
    patchUpload(key, { error: {
      code: body?.code === "payload_too_large" ? "document_too_large"
        : body?.code ?? `http_${xhr.status}`,
      message: body?.message ?? `the server answered ${xhr.status}`,
    } });
  };
  xhr.onerror = () => patchUpload(key, { error: { code: "network",
    message: "the connection failed during the upload" } });
  xhr.send(form);
}

/** The project the Documents view shows: the bound session's, else "default". */
export function shownProject(s: State): string {
  return s.sessions.find((x) => x.id === s.sessionId)?.projectId ?? "default";
}
