// executor-inferentia's settings live in libs/settings (executor-inferentia.ts), with every other service's.
export { executorInferentiaSettings as envSchema } from "@sloserve/settings";
