export { waitFor, type Truthy, type WaitForOptions } from "./wait-for.js";
export { INTEGRATION_MARKER, PROCESS_STARTERS, TEST_ROOTS, integrationReason, integrationTestFiles, testFiles } from "./test-files.js";
