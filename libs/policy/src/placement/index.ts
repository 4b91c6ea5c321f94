// Where variant instances go: worker choice and bin packing, accelerator sharing, interference.
export * from "./placement.js";
export * from "./accelerator-share.js";
export * from "./interference.js";
