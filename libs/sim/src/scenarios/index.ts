// The registry of named scenarios (`npm run sim -- <name>`), in the order `sim all` runs them.
// To add one, append two lines at the end (ES imports are hoisted, so an import below works):
//   import { myScenario } from "./my-scenario.js";
//   scenarios.push(myScenario);
import type { Scenario } from "../scenario.js";
import { infaasSelection } from "./infaas-selection.js";
import { infaasTable3 } from "./infaas-table3.js";

export const scenarios: Scenario[] = [];

scenarios.push(infaasTable3);
scenarios.push(infaasSelection);
import { markTwitter } from "./mark-twitter.js";
scenarios.push(markTwitter);
import { markMmpp } from "./mark-mmpp.js";
scenarios.push(markMmpp);
import { inferlinePlanner } from "./inferline-planner.js";
scenarios.push(inferlinePlanner);
import { inferlineRateChange } from "./inferline-rate-change.js";
scenarios.push(inferlineRateChange);
import { combined } from "./combined.js";
scenarios.push(combined);
import { replayScenario } from "./replay.js";
scenarios.push(replayScenario);
import { markSurge } from "./mark-surge.js";
scenarios.push(markSurge);
import { markInterruptions } from "./mark-interruptions.js";
scenarios.push(markInterruptions);
import { markModels } from "./mark-models.js";
scenarios.push(markModels);
import { infaasMechanisms } from "./infaas-mechanisms.js";
scenarios.push(infaasMechanisms);
import { infaasInterference } from "./infaas-interference.js";
scenarios.push(infaasInterference);
import { infaasE2e } from "./infaas-e2e.js";
scenarios.push(infaasE2e);
import { inferlineRealTraces } from "./inferline-real-traces.js";
scenarios.push(inferlineRealTraces);
import { inferlineSensitivity } from "./inferline-sensitivity.js";
scenarios.push(inferlineSensitivity);
