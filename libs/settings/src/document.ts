import { z } from "zod";

/**
 * The rows of docs/CONFIGURATION.md, read from a settings schema: each variable's name, its default
 * (the schema's own, as the environment string that gives it; or the `defaultText` of its metadata
 * where the default depends on the machine or on other settings) and its meaning (the schema's
 * description). The document is generated from these, so it cannot drift from what the services read.
 */
export interface SettingRow {
  name: string;
  /** The default as written in the environment; "" when there is none (unset). */
  default: string;
  description: string;
  /** Must be set (no default, not optional). */
  required: boolean;
}

interface SettingMeta {
  description?: string;
  defaultText?: string;
}

type AnySchema = z.ZodType;

/** The object schema under refinements and pipes (a settings schema is `z.object(...)`, maybe refined). */
function objectOf(schema: AnySchema): z.ZodObject {
  if (schema instanceof z.ZodObject) return schema;
  if (schema instanceof z.ZodPipe) return objectOf(schema.in as AnySchema);
  throw new Error("a settings schema is a zod object");
}

/** The first default met going into the input side (defaults, pipes, optionals), as it is written in the environment. */
function defaultOf(schema: AnySchema): { found: boolean; value?: unknown } {
  if (schema instanceof z.ZodDefault) return { found: true, value: schema.def.defaultValue };
  if (schema instanceof z.ZodPipe) return defaultOf(schema.in as AnySchema);
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return defaultOf(schema.unwrap() as AnySchema);
  return { found: false };
}

function envString(value: unknown): string {
  if (Array.isArray(value)) return value.map(String).join(",");
  if (value === "") return '""';
  return String(value);
}

function optional(schema: AnySchema): boolean {
  return schema.safeParse(undefined).success;
}

/** One row per variable of a settings schema, in the schema's order. */
export function settingRows(schema: AnySchema): SettingRow[] {
  const shape = objectOf(schema).shape as Record<string, AnySchema>;
  return Object.entries(shape).map(([name, s]) => {
    const meta = (s.meta() ?? {}) as SettingMeta;
    const d = defaultOf(s);
    const text = meta.defaultText ?? (d.found ? envString(d.value) : "");
    return { name, default: text, description: meta.description ?? s.description ?? "", required: !d.found && !optional(s) };
  });
}
