/**
 * One host shared by its workers and its local function containers (the local provider, the local
 * function pool: `npm start` on one machine). A local "machine" or function container is a process on
 * the same cores, so it adds capacity only where the host has cores (and memory) that no worker
 * offers yet; beyond that it takes from the workers already there. These rules keep the shares within
 * the host: the vm-autoscaler launches a local worker only while one more fits ({@link hostRoom}),
 * and the dispatcher overflows to its local pool only onto cores no worker offers
 * ({@link localFunctionRoom}). Cloud providers' machines and Lambda's functions bring their own cores
 * and are not counted here.
 *
 * Pure: the callers give what the workers on the host report (their threads and offered memory) and
 * what the host has.
 */

/** What a worker offers its variants: threads (cores) and memory. */
export interface HostShare {
  threads: number;
  memoryBytes: number;
}

export interface HostRoomInput {
  /** The host's cores that workers may offer in all (HOST_CORES). */
  cores: number;
  /** The host's memory that workers may offer in all (its memory × WORKER_MEMORY_SHARE), bytes. */
  memoryBytes: number;
  /** The workers on the host now, booting ones included (lost ones are not: their share is free). */
  workers: readonly HostShare[];
  /** What one more worker would offer. */
  next: HostShare;
}

export interface HostRoom {
  /** How many more workers of `next`'s size fit on the host. */
  room: number;
  /** Which resource binds, with the figures. */
  reason: string;
}

const gib = (b: number): string => `${(b / 2 ** 30).toFixed(1)} GiB`;

/** How many more workers like `next` fit on the host without offering more cores or memory than it has. */
export function hostRoom(input: HostRoomInput): HostRoom {
  const threads = input.workers.reduce((s, w) => s + w.threads, 0);
  const memory = input.workers.reduce((s, w) => s + w.memoryBytes, 0);
  const byCores = input.next.threads > 0 ? Math.floor((input.cores - threads) / input.next.threads) : Infinity;
  const byMemory = input.next.memoryBytes > 0 && Number.isFinite(input.next.memoryBytes) ? Math.floor((input.memoryBytes - memory) / input.next.memoryBytes) : Infinity;
  const room = Math.max(0, Math.min(byCores, byMemory));
  const n = input.workers.length;
  const reason =
    byCores <= byMemory
      ? `the host's ${input.cores} cores: ${threads} offered by ${n} worker(s), a new one offers ${input.next.threads}`
      : `the host's ${gib(input.memoryBytes)} for workers: ${gib(memory)} offered by ${n} worker(s), a new one offers ${gib(input.next.memoryBytes)}`;
  return { room: Number.isFinite(room) ? room : Number.MAX_SAFE_INTEGER, reason };
}

export interface LocalFunctionRoomInput {
  /** The host's cores that workers and local function containers may use in all (HOST_CORES). */
  cores: number;
  /** Threads offered by each worker on the host. */
  workerThreads: readonly number[];
  /** Local function invocations running now (each runs on one core). */
  inFlight: number;
}

/**
 * Whether one more query may run in a local function container: only on a core that no worker on the
 * host offers and no other invocation holds, where it adds capacity instead of taking it from the
 * workers it would relieve.
 */
export function localFunctionRoom(input: LocalFunctionRoomInput): { allowed: boolean; spareCores: number; reason: string } {
  const offered = input.workerThreads.reduce((s, t) => s + t, 0);
  const spareCores = Math.max(0, input.cores - offered);
  const allowed = input.inFlight < spareCores;
  const reason = allowed
    ? `${spareCores - input.inFlight} of the host's ${input.cores} cores free for local functions`
    : `the host's ${input.cores} cores: ${offered} offered by its ${input.workerThreads.length} worker(s), ${input.inFlight} running local functions`;
  return { allowed, spareCores, reason };
}
