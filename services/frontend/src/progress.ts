import { profileProgressSchema, type ProfileProgress } from "@sloserve/contracts";

/** The latest profiling progress per model and job, from `registry.event.profile.*`. */
export class ProfileProgressView {
  private readonly byModel = new Map<string, Map<string, ProfileProgress>>();

  apply(subject: string, body: unknown): void {
    if (!subject.startsWith("registry.event.profile.")) return;
    const parsed = profileProgressSchema.safeParse(body);
    if (!parsed.success) return;
    const e = parsed.data;
    let jobs = this.byModel.get(e.model);
    if (!jobs) this.byModel.set(e.model, (jobs = new Map()));
    jobs.set(e.job, e);
  }

  jobs(model: string): ProfileProgress[] {
    return [...(this.byModel.get(model)?.values() ?? [])];
  }

  forget(model: string): void {
    this.byModel.delete(model);
  }
}
