// Preloaded with NODE_OPTIONS="--import <this file>" by `npm run bench -- --profile` (node refuses
// --cpu-prof in NODE_OPTIONS, and the services are started by libs/stack with fixed arguments).
// Samples the process's CPU with the inspector's profiler and writes
// $BENCH_CPU_PROFILE_DIR/CPU.0.0.<pid>.0.0.cpuprofile (the file name `node --cpu-prof` would use)
// when the process exits.
import { Session } from "node:inspector";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.env.BENCH_CPU_PROFILE_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: 1000 });
  session.post("Profiler.start");
  let written = false;
  const stop = () => {
    if (written) return;
    written = true;
    // The in-thread session answers synchronously, so this works inside process.exit.
    session.post("Profiler.stop", (err, result) => {
      if (!err && result) writeFileSync(join(dir, `CPU.0.0.${process.pid}.0.0.cpuprofile`), JSON.stringify(result.profile));
    });
  };
  const exit = process.exit.bind(process);
  process.exit = (code) => {
    stop();
    return exit(code);
  };
  process.on("exit", stop);
}
