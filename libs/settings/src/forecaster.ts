import { z } from "zod";
import { commonEnvSchema } from "@sloserve/contracts";
import { DEFAULT_PREDICTOR, parsePredictorSpec, parsePredictorsByApp } from "@sloserve/policy";

/** The forecaster's settings (services/forecaster): MArk's prediction unit, window, horizon and predictors (§4.2). */
export const forecasterSettings = commonEnvSchema.extend({
  UNIT_S: z.coerce.number().int().min(1).default(60).describe("Prediction unit Pu, seconds."),
  SAMPLE_S: z.coerce.number().int().min(1).default(5).describe("Sample window Ps, seconds (divides UNIT_S)."),
  HORIZON: z.coerce.number().int().min(1).default(60).describe("Units forecast, Pw."),
  SEASON: z.coerce.number().int().min(2).default(1440).describe("Units per season."),
  KEEP: z.coerce.number().int().min(2).default(10080).describe("Units of history kept."),
  FORECASTER: z.string().default(DEFAULT_PREDICTOR).superRefine((v, ctx) => {
    try {
      parsePredictorSpec(v);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
    }
  }).describe("The predictor of every app (libs/policy predictors.ts): auto, last-value, seasonal-naive, holt-winters, or module:/path/to/predictor.js (a user's Forecaster; examples/predictor-recent-peak.js)."),
  FORECASTER_BY_APP: z.string().default("").transform((v, ctx) => {
    try {
      return parsePredictorsByApp(v);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
      return z.NEVER;
    }
  }).describe("Per-app predictors, `app=name,app2=module:/path.js`; apps not named use FORECASTER."),
});
export type ForecasterSettings = z.infer<typeof forecasterSettings>;
