// npm run docs:config: writes docs/CONFIGURATION.md from the settings schemas (libs/settings).
import { writeFileSync } from "node:fs";
import { configurationMarkdown } from "@sloserve/settings";

const path = new URL("../docs/CONFIGURATION.md", import.meta.url);
writeFileSync(path, configurationMarkdown());
console.log("wrote docs/CONFIGURATION.md");
