import { Alert } from "@mantine/core";
// The Form itself, not the package index: the index also exports a test helper that
// imports @rjsf/validator-ajv8 (ajv compiles with new Function, which the CSP refuses).
import Form from "@rjsf/core/lib/components/Form.js";
import type { RJSFSchema } from "@rjsf/utils";

import { cspSafeValidator } from "./schemaValidator";

/** STRUCTURE_EDIT: a form generated from the item's JSON Schema (@rjsf/core); the
 * validation errors show inline under their fields, before anything is sent. */
export function StructureEdit({ schema, value, busy, onSubmit }: {
  schema: RJSFSchema; value: unknown; busy: boolean; onSubmit: (value: unknown) => void;
}) {
  if (!schema || typeof schema !== "object") {
    return <Alert color="yellow">This item carries no schema to build a form from.</Alert>;
  }
  return (
    <div className="schema-form" data-testid="structure-form">
      <Form schema={schema} formData={value} validator={cspSafeValidator} noHtml5Validate
        showErrorList={false} disabled={busy}
        onSubmit={({ formData }) => onSubmit(formData)} />
    </div>
  );
}
