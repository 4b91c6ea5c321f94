import { describe, expect, it } from "vitest";
import { ManualClock } from "@sloserve/contracts";
import { DOCKER_LABELS, DOCKER_NATS_CA_PATH, DockerWorkerProvider, dockerConnection, dockerContainerSpec, dockerLabels, dockerWorkerEnv, exitReason, fromDockerLabels } from "@sloserve/providers";
import { memoryLogger } from "./support.js";

/**
 * The Docker provider's pure parts: the engine's address, the labels, the executor's environment and
 * the container's create request, and how an exit reads. Its behaviour against a real engine (launch,
 * ready line, loss, drain on SIGTERM, finding its containers after a restart) is shown by
 * test/deploy/docker-provider.test.ts.
 */

describe("docker worker provider: pure parts", () => {
  it("dockerConnection: unix sockets and tcp addresses, anything else refused", () => {
    expect(dockerConnection("unix:///var/run/docker.sock")).toEqual({ socketPath: "/var/run/docker.sock" });
    expect(dockerConnection("tcp://10.0.0.5:2375")).toEqual({ host: "10.0.0.5", port: 2375, protocol: "http" });
    expect(dockerConnection("tcp://[::1]:2375")).toEqual({ host: "::1", port: 2375, protocol: "http" });
    expect(() => dockerConnection("/var/run/docker.sock")).toThrow(/use unix:\/\/\/path\/to\/docker.sock or tcp:\/\/host:port/);
    expect(() => dockerConnection("tcp://docker")).toThrow(/tcp:\/\/host:port/);
    expect(() => dockerConnection("ssh://me@host")).toThrow(/docker host "ssh:\/\/me@host"/);
  });

  it("labels: what a container says about its worker, read back; another owner's or a broken one is not ours", () => {
    const labels = dockerLabels({ workerId: "cpu-docker-0a1b2c3d", kind: "cpu", instanceType: "c5.xlarge", market: "spot", owner: "edge-1", launchedAtMs: 1_800_000_000_123, reason: "r".repeat(300) });
    expect(labels).toEqual({
      "sloserve.worker": "cpu-docker-0a1b2c3d",
      "sloserve.kind": "cpu",
      "sloserve.instance-type": "c5.xlarge",
      "sloserve.market": "spot",
      "sloserve.launcher": "edge-1",
      "sloserve.launched-at": "1800000000123",
      "sloserve.reason": "r".repeat(250),
    });
    expect(fromDockerLabels(labels, "edge-1")).toEqual({ workerId: "cpu-docker-0a1b2c3d", kind: "cpu", instanceType: "c5.xlarge", market: "spot", owner: "edge-1", launchedAtMs: 1_800_000_000_123 });
    expect(fromDockerLabels(labels, "edge-2")).toBe('launcher label is "edge-1", not "edge-2"');
    expect(fromDockerLabels({ ...labels, [DOCKER_LABELS.kind]: "tpu" }, "edge-1")).toMatch(/sloserve.kind label "tpu" is not a hardware kind/);
    expect(fromDockerLabels({ ...labels, [DOCKER_LABELS.launchedAt]: "yesterday" }, "edge-1")).toMatch(/sloserve.launched-at label "yesterday" is not a time/);
    const { [DOCKER_LABELS.worker]: _dropped, ...noWorker } = labels;
    expect(fromDockerLabels(noWorker, "edge-1")).toBe("no sloserve.worker label");
    expect(fromDockerLabels(undefined, "edge-1")).toMatch(/launcher label is undefined/);
  });

  it("environment: the kind's, then the spec's, then the provider's own (which win), and none of this process's", () => {
    process.env.SLOSERVE_TEST_LEAK = "no";
    const env = dockerWorkerEnv({
      kind: "gpu",
      workerId: "gpu-docker-00000001",
      natsUrl: "nats://10.0.0.2:4222",
      redisUrl: "redis://10.0.0.2:6379",
      logLevel: "debug",
      kindEnv: { WORKER_THREADS: "4", NATS_USER: "executor", NATS_PASSWORD: "s3cret", SERVICE: "frontend" },
      env: { WORKER_THREADS: "2", BACKEND: "emulated" },
      natsTlsCa: DOCKER_NATS_CA_PATH,
    });
    delete process.env.SLOSERVE_TEST_LEAK;
    expect(env).toEqual([
      "WORKER_THREADS=2",
      "NATS_USER=executor",
      "NATS_PASSWORD=s3cret",
      "SERVICE=executor-gpu",
      "BACKEND=emulated",
      "WORKER_ID=gpu-docker-00000001",
      "NATS_URL=nats://10.0.0.2:4222",
      "REDIS_URL=redis://10.0.0.2:6379",
      "LOG_LEVEL=debug",
      "NATS_TLS_CA=/etc/sloserve/nats-ca.pem",
    ]);
    expect(dockerWorkerEnv({ kind: "cpu", workerId: "w", natsUrl: "n", redisUrl: "r", logLevel: "info" })).toEqual(["SERVICE=executor-cpu", "WORKER_ID=w", "NATS_URL=n", "REDIS_URL=r", "LOG_LEVEL=info"]);
  });

  it("container spec: image, network, labels, stop signal and timeout, no restart; the CA mounted; accelerators as the EC2 user data gives them", () => {
    const labels = { [DOCKER_LABELS.worker]: "cpu-docker-1" };
    const cpu = dockerContainerSpec({ name: "cpu-docker-1", image: "sloserve:latest", network: "host", kind: "cpu", env: ["A=1"], labels, stopTimeoutS: 15 });
    expect(cpu).toEqual({
      name: "cpu-docker-1",
      Image: "sloserve:latest",
      Env: ["A=1"],
      Labels: labels,
      StopSignal: "SIGTERM",
      StopTimeout: 15,
      HostConfig: { NetworkMode: "host", RestartPolicy: { Name: "no" } },
    });
    const gpu = dockerContainerSpec({ name: "g", image: "registry/sloserve:1", network: "sloserve", kind: "gpu", env: [], labels: {}, stopTimeoutS: 30, natsTlsCaFile: "/etc/nats/ca.pem" });
    expect(gpu.HostConfig).toEqual({
      NetworkMode: "sloserve",
      RestartPolicy: { Name: "no" },
      Binds: ["/etc/nats/ca.pem:/etc/sloserve/nats-ca.pem:ro"],
      DeviceRequests: [{ Driver: "", Count: -1, DeviceIDs: [], Capabilities: [["gpu"]], Options: {} }],
    });
    const inf = dockerContainerSpec({ name: "i", image: "x", network: "host", kind: "inferentia", env: [], labels: {}, stopTimeoutS: 1 });
    expect(inf.HostConfig?.Devices).toEqual([{ PathOnHost: "/dev/neuron0", PathInContainer: "/dev/neuron0", CgroupPermissions: "rwm" }]);
  });

  it("container spec: a container limited as a VM, its CPUs (--cpus) and memory without swap (--memory, --memory-swap)", () => {
    const limited = dockerContainerSpec({ name: "c", image: "x", network: "host", kind: "cpu", env: [], labels: {}, stopTimeoutS: 1, cpus: 1.5, memoryMb: 2048 });
    expect(limited.HostConfig).toMatchObject({ NanoCpus: 1_500_000_000, Memory: 2048 * 1048576, MemorySwap: 2048 * 1048576 });
  });

  it("exitReason: the exit code, the signal behind 128 + n, the OOM killer, an engine error, a removal", () => {
    expect(exitReason({ ExitCode: 0 })).toBe("exited with code 0");
    expect(exitReason({ ExitCode: 1 })).toBe("exited with code 1");
    expect(exitReason({ ExitCode: 137 })).toBe("exited with code 137 (SIGKILL)");
    expect(exitReason({ ExitCode: 143 })).toBe("exited with code 143 (SIGTERM)");
    expect(exitReason({ ExitCode: 137, OOMKilled: true })).toBe("exited with code 137 (SIGKILL), killed for memory (OOM)");
    expect(exitReason({ ExitCode: 127, Error: "exec: node: not found" })).toBe("exited with code 127, engine error: exec: node: not found");
    expect(exitReason(undefined)).toBe("is gone (removed)");
  });

  it("refuses bad options before talking to any engine", () => {
    const { log } = memoryLogger("docker-test");
    const clock = new ManualClock(0);
    expect(() => new DockerWorkerProvider({ natsUrl: "", redisUrl: "redis://x", clock, log, watchEveryMs: 0 })).toThrow(/natsUrl is required/);
    expect(() => new DockerWorkerProvider({ natsUrl: "nats://x", redisUrl: "redis://x", host: "docker.sock", clock, log, watchEveryMs: 0 })).toThrow(/invalid docker worker provider options: docker host "docker.sock"/);
    expect(() => new DockerWorkerProvider({ natsUrl: "nats://x", redisUrl: "redis://x", owner: "a b", stopTimeoutS: 0.5, clock, log, watchEveryMs: 0 })).toThrow(/owner "a b".*stopTimeoutS must be a whole number of seconds > 0, got 0.5/);
  });
});
