/**
 * Where a service shell reads the time: injected, so that tests drive it with a fake clock
 * (`advance(ms)`) and decisions see the time they are taken at. `systemClock` (libs/bus) is the real one.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

/** A clock that moves only when told: for tests of the service shells. */
export class ManualClock implements Clock {
  constructor(private ms = 0) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): number {
    this.ms += ms;
    return this.ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
}
