// Access decisions of the frontend's API keys.
export * from "./access.js";
