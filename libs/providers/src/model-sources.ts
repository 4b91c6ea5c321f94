/**
 * Where a function container reads model binaries (a `ModelSource` of the function handler):
 * - the model repository, the NATS object store bucket `models` (the local pool's containers, given
 *   NATS_URL: each container fetches what it loads, as a worker does);
 * - a directory holding `<dir>/<object>` (a Lambda function, MODELS_DIR: a layer at /opt/models, or
 *   files bundled with the function; also the local pool's containers when given a directory).
 */
import { readFile } from "node:fs/promises";
import { isAbsolute, join, normalize, sep } from "node:path";
import { ErrorCode, ServeError } from "@sloserve/contracts";
import type { Bus } from "@sloserve/bus";
import type { ModelSource } from "./function-handler.js";

export function objectStoreModelSource(bus: Pick<Bus, "models">): ModelSource {
  return async (object) => {
    const bytes = await bus.models.getBlob(object);
    if (!bytes) throw new ServeError(ErrorCode.internal, `model object '${object}' is not in the model repository (NATS object store bucket 'models')`);
    return bytes;
  };
}

export function directoryModelSource(dir: string): ModelSource {
  return async (object) => {
    const relative = normalize(object);
    if (isAbsolute(relative) || relative === ".." || relative.startsWith(`..${sep}`)) {
      throw new ServeError(ErrorCode.invalidName, `model object '${object}' is not a relative path inside the models directory`);
    }
    const path = join(dir, relative);
    try {
      return await readFile(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") throw new ServeError(ErrorCode.internal, `model object '${object}' is not in the function's models directory (${path} is missing)`);
      throw new ServeError(ErrorCode.internal, `cannot read model object '${object}' from ${path}: ${(err as Error).message}`);
    }
  };
}
