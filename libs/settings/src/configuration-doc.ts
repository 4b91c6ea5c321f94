import { commonEnvSchema } from "@sloserve/contracts";
import { settingRows } from "./document.js";
import { SERVICE_SETTINGS } from "./catalog.js";

/** A Markdown table cell: pipes escaped, one line. */
function cell(s: string): string {
  return s.replace(/\|/g, "\\|").replace(/\s+/g, " ").trim();
}

/** docs/CONFIGURATION.md, from the settings schemas (the test checks the file is this text). */
export function configurationMarkdown(): string {
  const out: string[] = [
    "# Configuration",
    "",
    "Every service reads its settings from the environment, through one zod schema per service in",
    "[libs/settings](../libs/settings/src/) (with the common ones of [libs/contracts](../libs/contracts/src/config.ts)).",
    "A setting that does not parse stops the service at start with a message naming every problem.",
    "This file is generated from those schemas by `npm run docs:config`; a test fails when it is out of date.",
    "",
    "A default in *italics* depends on the machine or on other settings; an empty default means unset.",
    "",
  ];
  const common = new Set(settingRows(commonEnvSchema).map((r) => r.name));
  for (const { service, schema, summary } of SERVICE_SETTINGS) {
    const own = schema === commonEnvSchema;
    out.push(`## ${service}`, "", own ? summary : `${summary} Beside the common settings:`, "", "| variable | default | meaning |", "|---|---|---|");
    for (const r of settingRows(schema)) {
      if (!own && common.has(r.name)) continue;
      const d = r.required ? "**required**" : r.default === "" || r.default === "unset" ? "" : /^[-\w.,:/"%+]+$/.test(r.default) ? `\`${r.default}\`` : `*${cell(r.default)}*`;
      out.push(`| \`${r.name}\` | ${d} | ${cell(r.description)} |`);
    }
    out.push("");
  }
  return out.join("\n");
}
