import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { recordingServer, type RecordedRequest } from "./support.js";

/**
 * A small Nomad for the provider's tests, on loopback: the four endpoints the provider uses, answering
 * with Nomad's field names, and a scheduler reduced to what a job group's count does. It records
 * every request.
 *
 * - `GET /v1/job/:job` → `{ID, Name, Namespace, Type, TaskGroups: [{Name, Count}]}`; 404 unknown job.
 * - `GET /v1/job/:job/allocations` → allocation stubs (ID, EvalID, Name `job.group[i]`, JobID,
 *   TaskGroup, DesiredStatus, DesiredDescription, DesiredTransition, ClientStatus, ClientDescription,
 *   CreateTime/ModifyTime in ns).
 * - `POST|PUT /v1/job/:job/scale` with `{Count, Target: {Group}, Message, Meta}` → `{EvalID, EvalCreateIndex,
 *   JobModifyIndex, Index, Warnings}`; 400 on a bad body.
 * - `POST|PUT /v1/allocation/:id/stop` → `{EvalID, Index}`: marks the allocation for migration.
 * - ACL: with a token set, any other X-Nomad-Token gets 403 "Permission denied". `?namespace=` selects
 *   the job's namespace ("default" without it).
 *
 * Scheduling runs at once, inside the request that creates the evaluation (a real one runs a moment
 * later: the provider must not care). Like Nomad's reconciler: a group with too many allocations stops
 * those marked for migration first, then the highest name indexes; an allocation marked for migration
 * that is still needed is stopped and replaced under the same name; missing allocations are placed
 * with the lowest free indexes, `pending` until the test says otherwise. `blockPlacements` stands for
 * a full cluster (the evaluation places nothing). Not modelled: rescheduling of failed allocations,
 * deployments, canaries, nodes.
 */

export interface FakeAllocation {
  ID: string;
  EvalID: string;
  Name: string;
  Namespace: string;
  JobID: string;
  TaskGroup: string;
  DesiredStatus: "run" | "stop" | "evict";
  DesiredDescription: string;
  DesiredTransition: { Migrate?: boolean };
  ClientStatus: "pending" | "running" | "complete" | "failed" | "lost" | "unknown";
  ClientDescription: string;
  CreateIndex: number;
  ModifyIndex: number;
  CreateTime: number;
  ModifyTime: number;
}

interface FakeJob {
  ID: string;
  Namespace: string;
  groups: Map<string, number>;
  scalingEvents: Array<{ group: string; count: number; message: string; meta: unknown }>;
}

export interface FakeNomad {
  url: string;
  requests: RecordedRequest[];
  allocations: FakeAllocation[];
  blockPlacements: boolean;
  count(job: string, group: string, namespace?: string): number;
  scalingEvents(job: string, namespace?: string): FakeJob["scalingEvents"];
  /** What the client reports for an allocation. */
  setClientStatus(id: string, status: FakeAllocation["ClientStatus"], description?: string): void;
  /** Garbage collection: the allocation is no longer listed. */
  collect(id: string): void;
  close(): Promise<void>;
}

export async function startFakeNomad(options: { token?: string; now: () => number; jobs: Array<{ id: string; namespace?: string; groups: Record<string, number> }> }): Promise<FakeNomad> {
  const jobs = new Map<string, FakeJob>();
  const allocations: FakeAllocation[] = [];
  let index = 100;
  const ns = (ms: number): number => ms * 1e6;
  const key = (namespace: string, id: string): string => `${namespace}/${id}`;
  const state = { blockPlacements: false };

  const live = (job: FakeJob, group: string): FakeAllocation[] =>
    allocations.filter((a) => a.Namespace === job.Namespace && a.JobID === job.ID && a.TaskGroup === group && a.DesiredStatus === "run" && !["complete", "failed", "lost"].includes(a.ClientStatus));
  const nameIndex = (a: FakeAllocation): number => Number(/\[(\d+)\]$/.exec(a.Name)?.[1] ?? -1);
  const stop = (a: FakeAllocation, description: string): void => {
    a.DesiredStatus = "stop";
    a.DesiredDescription = description;
    a.ClientStatus = "complete";
    a.ClientDescription = "All tasks have completed";
    a.ModifyIndex = ++index;
    a.ModifyTime = ns(options.now());
  };
  const place = (job: FakeJob, group: string, evalId: string, at: number): void => {
    index++;
    allocations.push({
      ID: randomUUID(),
      EvalID: evalId,
      Name: `${job.ID}.${group}[${at}]`,
      Namespace: job.Namespace,
      JobID: job.ID,
      TaskGroup: group,
      DesiredStatus: "run",
      DesiredDescription: "",
      DesiredTransition: {},
      ClientStatus: "pending",
      ClientDescription: "No tasks have started",
      CreateIndex: index,
      ModifyIndex: index,
      CreateTime: ns(options.now()),
      ModifyTime: ns(options.now()),
    });
  };
  /** One evaluation of a job group, as Nomad's reconciler would do it for a count change or a migration. */
  const reconcile = (job: FakeJob, group: string, evalId: string): void => {
    const count = job.groups.get(group) ?? 0;
    const current = live(job, group);
    const migrating = current.filter((a) => a.DesiredTransition.Migrate).sort((a, b) => nameIndex(b) - nameIndex(a));
    const untainted = current.filter((a) => !a.DesiredTransition.Migrate).sort((a, b) => nameIndex(b) - nameIndex(a));
    let remove = current.length - count;
    for (const a of migrating) {
      if (remove > 0) {
        stop(a, "alloc not needed due to job update");
        remove--;
      } else {
        stop(a, "alloc is being migrated");
        if (!state.blockPlacements) place(job, group, evalId, nameIndex(a));
      }
    }
    for (const a of untainted) {
      if (remove <= 0) break;
      stop(a, "alloc not needed due to job update");
      remove--;
    }
    const used = new Set(live(job, group).map(nameIndex));
    for (let at = 0; live(job, group).length < count && !state.blockPlacements; at++) {
      if (!used.has(at)) place(job, group, evalId, at);
    }
  };

  for (const spec of options.jobs) {
    const job: FakeJob = { ID: spec.id, Namespace: spec.namespace ?? "default", groups: new Map(Object.entries(spec.groups)), scalingEvents: [] };
    jobs.set(key(job.Namespace, job.ID), job);
    for (const group of job.groups.keys()) reconcile(job, group, randomUUID());
  }
  for (const a of allocations) a.ClientStatus = "running";

  const json = (res: ServerResponse, status: number, body: unknown): void => void res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  const text = (res: ServerResponse, status: number, body: string): void => void res.writeHead(status, { "content-type": "text/plain" }).end(body);

  const server = await recordingServer((req, res) => {
    if (options.token !== undefined && req.headers["x-nomad-token"] !== options.token) return text(res, 403, "Permission denied");
    const url = new URL(req.url, "http://nomad");
    const namespace = url.searchParams.get("namespace") ?? "default";
    const write = req.method === "POST" || req.method === "PUT";
    let m: RegExpExecArray | null;
    if ((m = /^\/v1\/job\/([^/]+)(\/allocations|\/scale)?$/.exec(url.pathname))) {
      const job = jobs.get(key(namespace, decodeURIComponent(m[1]!)));
      if (!job) return text(res, 404, "job not found");
      if (!m[2] && req.method === "GET") {
        return json(res, 200, { ID: job.ID, Name: job.ID, Namespace: job.Namespace, Type: "service", TaskGroups: [...job.groups].map(([Name, Count]) => ({ Name, Count })) });
      }
      if (m[2] === "/allocations" && req.method === "GET") {
        return json(res, 200, allocations.filter((a) => a.Namespace === job.Namespace && a.JobID === job.ID).map((a) => ({ ...a })));
      }
      if (m[2] === "/scale" && write) {
        let body: { Count?: unknown; Target?: { Group?: unknown }; Message?: unknown; Meta?: unknown };
        try {
          body = JSON.parse(req.body) as typeof body;
        } catch {
          return text(res, 400, "Unable to decode request body");
        }
        const group = body.Target?.Group;
        if (typeof group !== "string" || !job.groups.has(group)) return text(res, 400, `task group ${JSON.stringify(group)} not found`);
        if (typeof body.Count !== "number" || !Number.isInteger(body.Count) || body.Count < 0) return text(res, 400, "scaling action count must be a non-negative integer");
        job.groups.set(group, body.Count);
        job.scalingEvents.push({ group, count: body.Count, message: String(body.Message ?? ""), meta: body.Meta });
        const evalId = randomUUID();
        reconcile(job, group, evalId);
        index++;
        return json(res, 200, { EvalID: evalId, EvalCreateIndex: index, JobModifyIndex: index, Index: index, Warnings: "" });
      }
    }
    if ((m = /^\/v1\/allocation\/([^/]+)\/stop$/.exec(url.pathname)) && write) {
      const alloc = allocations.find((a) => a.ID === m![1] && a.Namespace === namespace);
      if (!alloc) return text(res, 404, "alloc not found");
      alloc.DesiredTransition = { Migrate: true };
      const job = jobs.get(key(alloc.Namespace, alloc.JobID))!;
      const evalId = randomUUID();
      reconcile(job, alloc.TaskGroup, evalId);
      return json(res, 200, { EvalID: evalId, Index: ++index });
    }
    text(res, 404, `no such endpoint: ${req.method} ${url.pathname}`);
  });

  return {
    url: server.url,
    requests: server.requests,
    allocations,
    get blockPlacements() {
      return state.blockPlacements;
    },
    set blockPlacements(value: boolean) {
      state.blockPlacements = value;
    },
    count: (job, group, namespace = "default") => jobs.get(key(namespace, job))?.groups.get(group) ?? 0,
    scalingEvents: (job, namespace = "default") => jobs.get(key(namespace, job))?.scalingEvents ?? [],
    setClientStatus: (id, status, description = "") => {
      const a = allocations.find((x) => x.ID === id);
      if (!a) throw new Error(`fake nomad: no allocation ${id}`);
      a.ClientStatus = status;
      a.ClientDescription = description;
      a.ModifyTime = ns(options.now());
    },
    collect: (id) => {
      const i = allocations.findIndex((x) => x.ID === id);
      if (i >= 0) allocations.splice(i, 1);
    },
    close: () => server.close(),
  };
}
