// A validator for @rjsf/core that never compiles code: @cfworker/json-schema interprets
// the schema, so it runs under the page's CSP (no eval / new Function), which refuses
// rjsf's usual ajv validator. The server validates every answer again (invalid_input).
import { Validator, type OutputUnit, type Schema } from "@cfworker/json-schema";
import {
  createErrorHandler, toErrorSchema, unwrapErrorHandler, validationDataMerge,
  type CustomValidator, type ErrorTransformer, type RJSFSchema, type RJSFValidationError,
  type UiSchema, type ValidationData, type ValidatorType,
} from "@rjsf/utils";

/** Keywords whose errors only say that one of their subschemas failed: the subschema's
 * own error (reported as well) is the one to show next to the field. */
const WRAPPERS = new Set([
  "properties", "items", "prefixItems", "additionalItems", "allOf", "anyOf", "oneOf", "$ref",
  "dependentSchemas", "if", "then", "else", "not", "contains", "unevaluatedProperties",
  "unevaluatedItems", "patternProperties",
]);

function validate(schema: RJSFSchema, data: unknown): OutputUnit[] {
  return new Validator(schema as Schema, "2020-12", false).validate(data).errors;
}

/** cfworker's `#/a/0/b` instance pointer → rjsf's `.a.0.b` property path; a missing
 * required property is reported at the property itself, as rjsf shows it. */
function toRjsf(unit: OutputUnit): RJSFValidationError {
  const path = unit.instanceLocation.replace(/^#/, "").split("/").filter(Boolean)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  let message = unit.error;
  if (unit.keyword === "required") {
    const missing = /property "([^"]+)"/.exec(unit.error)?.[1];
    if (missing) path.push(missing);
    message = "is a required property";
  }
  const property = path.length ? `.${path.join(".")}` : "";
  return { name: unit.keyword, message, property, stack: `${property || "value"} ${message}`,
    schemaPath: unit.keywordLocation };
}

export const cspSafeValidator: ValidatorType = {
  validateFormData(
    formData: unknown, schema: RJSFSchema, customValidate?: CustomValidator,
    transformErrors?: ErrorTransformer, uiSchema?: UiSchema,
  ): ValidationData<unknown> {
    let errors = validate(schema, formData).filter((u) => !WRAPPERS.has(u.keyword)).map(toRjsf);
    if (transformErrors) errors = transformErrors(errors, uiSchema);
    const data: ValidationData<unknown> = { errors, errorSchema: toErrorSchema(errors) };
    if (!customValidate) return data;
    const custom = unwrapErrorHandler(
      customValidate(formData, createErrorHandler(formData), uiSchema));
    return validationDataMerge(data, custom);
  },
  isValid(schema: RJSFSchema, formData: unknown, rootSchema: RJSFSchema): boolean {
    try {
      return validate({ ...schema, $defs: rootSchema.$defs, definitions: rootSchema.definitions },
        formData).length === 0;
    } catch {
      return false;
    }
  },
  rawValidation<Result = OutputUnit>(schema: RJSFSchema, formData?: unknown) {
    try {
      return { errors: validate(schema, formData) as Result[] };
    } catch (e) {
      return { validationError: e as Error };
    }
  },
};
