// `sloserve`'s entry (bin/sloserve.js runs it through tsx): the commands are in program.ts.
import { main } from "./program.js";

process.exitCode = await main(process.argv.slice(2));
