import type { z } from "zod";
import { commonEnvSchema } from "@sloserve/contracts";
import { dispatcherSettings } from "./dispatcher.js";
import { executorCpuSettings } from "./executor-cpu.js";
import { executorGpuSettings } from "./executor-gpu.js";
import { executorInferentiaSettings } from "./executor-inferentia.js";
import { forecasterSettings } from "./forecaster.js";
import { frontendSettings } from "./frontend.js";
import { modelAutoscalerSettings } from "./model-autoscaler.js";
import { registrarSettings } from "./registrar.js";
import { vmAutoscalerSettings } from "./vm-autoscaler.js";

/** Every service's settings, in the order docs/CONFIGURATION.md lists them. "common" is what each service reads beside its own. */
export const SERVICE_SETTINGS: ReadonlyArray<{ service: string; schema: z.ZodType; summary: string }> = [
  { service: "common", schema: commonEnvSchema, summary: "Read by every service: where NATS and Redis are, logging, metrics, NATS credentials and TLS." },
  { service: "frontend", schema: frontendSettings, summary: "The HTTP and gRPC APIs, the dashboard, access control, TLS." },
  { service: "dispatcher", schema: dispatcherSettings, summary: "Query routing; serverless overflow and its circuit breaker." },
  { service: "registrar", schema: registrarSettings, summary: "Model registration, the variants generated and profiled, SLO-aware batch tuning." },
  { service: "model-autoscaler", schema: modelAutoscalerSettings, summary: "INFaaS's model-level scaling; InferLine's pipeline Planner and Tuner." },
  { service: "vm-autoscaler", schema: vmAutoscalerSettings, summary: "The machine plan (INFaaS's VM rules, MArk's predictive plan and SLO monitor, spot) and the worker provider." },
  { service: "forecaster", schema: forecasterSettings, summary: "MArk's load forecasts (§4.2)." },
  { service: "executor-cpu", schema: executorCpuSettings, summary: "A CPU worker." },
  { service: "executor-gpu", schema: executorGpuSettings, summary: "A GPU worker (CUDA, TensorRT)." },
  { service: "executor-inferentia", schema: executorInferentiaSettings, summary: "An Inferentia worker, in front of a Neuron-backed inference server." },
];
