import type { Hardware } from "@sloserve/contracts";
import type { Market } from "./types.js";

/**
 * The user data of an EC2 worker: a bash script, run once by cloud-init at first boot, that starts
 * the kind's executor from the project's image (the repository's Dockerfile; `SERVICE` picks the
 * service) so that it joins NATS and Redis under its worker id, and on spot instances the spot watcher
 * beside it. Both use the host network: the executor reaches NATS and Redis, the watcher reaches the
 * instance metadata service (IMDSv2's default hop limit of 1 keeps it from bridged containers). On
 * shutdown (a TerminateInstances, or the spot reclaim) Docker stops the containers with SIGTERM, on
 * which the executor drains.
 *
 * The launch template supplies the rest: an AMI with Docker (and the NVIDIA container toolkit or the
 * Neuron driver for accelerators), subnet, security groups, instance profile, IMDSv2.
 */

export interface UserDataInput {
  workerId: string;
  cluster: string;
  kind: Hardware;
  instanceType: string;
  market: Market;
  /** The executor service (`executor-cpu`, …). */
  service: string;
  image: string;
  natsUrl: string;
  redisUrl: string;
  logLevel: string;
  /** Extra environment for the executor (WORKER_THREADS, …). */
  env: Record<string, string>;
  /** Start the spot watcher (spot instances). */
  spotWatcher: boolean;
  /**
   * The NATS user the executor and the spot watcher connect as (the `executor` user of
   * libs/contracts nats-permissions.ts), with its password and the CA of the servers' TLS read at boot
   * from SSM Parameter Store by the instance's own role (`ssm:GetParameter`, and `kms:Decrypt` for a
   * SecureString): no secret is written into the user data, which anyone allowed to describe the
   * instance can read. Absent: NATS without users (as `npm start` without `--auth`).
   */
  nats?: NatsWorkerCredentials | undefined;
}

export interface NatsWorkerCredentials {
  user: string;
  /** SSM parameter holding the user's password (a SecureString). */
  passwordParameter: string;
  /** SSM parameter holding the PEM of the CA the NATS servers' certificates are checked against (TLS on). */
  tlsCaParameter?: string | undefined;
}

/** EC2 refuses user data over 16 KB (before base64). */
export const USER_DATA_LIMIT_BYTES = 16 * 1024;

/** Single-quotes a word for bash: `it's` → `'it'\''s'`. */
export function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Device flags that give the executor's container its accelerators. */
const DEVICE_FLAGS: Record<Hardware, string[]> = {
  cpu: [],
  gpu: ["--gpus", "all"],
  inferentia: ["--device", "/dev/neuron0"],
};

export function userDataScript(input: UserDataInput): string {
  const env = (name: string, value: string): string => `-e ${shellQuote(`${name}=${value}`)}`;
  const common = [env("NATS_URL", input.natsUrl), env("REDIS_URL", input.redisUrl), env("WORKER_ID", input.workerId), env("LOG_LEVEL", input.logLevel)];
  const secrets: string[] = [];
  const nats = input.nats;
  if (nats) {
    const ssm = (parameter: string, decrypt: boolean): string => `aws ssm get-parameter --name ${shellQuote(parameter)}${decrypt ? " --with-decryption" : ""} --query Parameter.Value --output text`;
    // Read at boot by the instance's role; passed to the containers by name only (`-e NATS_PASSWORD`).
    secrets.push(`NATS_PASSWORD="$(${ssm(nats.passwordParameter, true)})"`, "export NATS_PASSWORD");
    common.push(env("NATS_USER", nats.user), "-e NATS_PASSWORD");
    if (nats.tlsCaParameter) {
      secrets.push('ETC="${SLOSERVE_ETC:-/etc/sloserve}"', 'mkdir -p "$ETC"', `${ssm(nats.tlsCaParameter, false)} > "$ETC/nats-ca.pem"`);
      common.push('-v "$ETC/nats-ca.pem:/etc/sloserve/nats-ca.pem:ro"', env("NATS_TLS_CA", "/etc/sloserve/nats-ca.pem"));
    }
  }
  const executorEnv = [env("SERVICE", input.service), ...Object.entries(input.env).map(([name, value]) => env(name, value))];
  const lines = [
    "#!/bin/bash",
    `# sloserve worker ${input.workerId}: ${input.kind} ${input.instanceType} ${input.market}, cluster ${input.cluster}.`,
    "# Written by libs/providers (ec2-user-data.ts): starts the executor, which joins NATS and Redis" + (input.spotWatcher ? ", and the spot watcher." : "."),
    "set -euo pipefail",
    `IMAGE=${shellQuote(input.image)}`,
    ...secrets,
    `COMMON=(--network host --restart on-failure ${common.join(" ")})`,
    "docker info >/dev/null 2>&1 || systemctl start docker",
    'docker pull "$IMAGE"',
    `docker run -d --name sloserve-executor "\${COMMON[@]}" ${[...DEVICE_FLAGS[input.kind], ...executorEnv].join(" ")} "$IMAGE"`,
  ];
  if (input.spotWatcher) {
    lines.push('docker run -d --name sloserve-spot-watcher "${COMMON[@]}" "$IMAGE" node --import tsx libs/providers/src/spot-watcher-main.ts');
  }
  return `${lines.join("\n")}\n`;
}

/** The script, base64-encoded as RunInstances wants it; refuses one over EC2's 16 KB. */
export function encodeUserData(script: string): string {
  const bytes = Buffer.from(script, "utf8");
  if (bytes.length > USER_DATA_LIMIT_BYTES) throw new Error(`user data is ${bytes.length} bytes; EC2 takes at most ${USER_DATA_LIMIT_BYTES} (trim the worker's env)`);
  return bytes.toString("base64");
}
