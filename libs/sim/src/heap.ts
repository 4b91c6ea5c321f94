/**
 * The simulator's event queue: a binary min-heap ordered by (time, sequence number). The sequence
 * number makes ties resolve in insertion order, so a run is deterministic for a seed (and, the keys
 * being unique, any correct heap pops the same order).
 *
 * An event is a time, a sequence number, a small integer kind and a reference, kept in parallel
 * arrays (times and sequence numbers in typed arrays, grown by doubling): comparisons read plain
 * doubles rather than fields of event objects (a pointer and a boxed number away each), and no event
 * object is allocated, reused or kept. Read the earliest event with `topT`, `topKind` and `topRef`
 * (while `size > 0`), then `pop` it.
 */
export class EventHeap {
  private t = new Float64Array(64);
  private seq = new Float64Array(64);
  private kind = new Uint8Array(64);
  private ref: unknown[] = new Array<unknown>(64).fill(null);
  private n = 0;
  /** The earliest event was taken (`take`) and is still in place: the next `push` replaces it. */
  private taken = false;

  get size(): number {
    return this.n;
  }

  /** Time of the earliest event (Infinity when empty). */
  topT(): number {
    return this.n > 0 ? (this.t[0] as number) : Infinity;
  }

  /** Sequence number of the earliest event (size > 0). */
  topSeq(): number {
    return this.seq[0] as number;
  }

  /** Kind of the earliest event (size > 0). */
  topKind(): number {
    return this.kind[0] as number;
  }

  /** Reference of the earliest event (size > 0). */
  topRef(): unknown {
    return this.ref[0];
  }

  /**
   * Take the earliest event (read it first with topT/topKind/topRef) and leave its place to the next
   * `push`, which then moves down from the root rather than up from a leaf after a pop (a handled
   * event mostly schedules one: a batch done starts the next); `settle` pops it if none came. Nothing
   * may read the heap between `take` and `settle`.
   */
  take(): void {
    this.taken = this.n > 0;
  }

  /** After `take`: remove the taken event if no `push` replaced it. */
  settle(): void {
    if (this.taken) {
      this.taken = false;
      this.pop();
    }
  }

  push(t: number, seq: number, kind: number, ref: unknown): void {
    if (this.taken) {
      this.taken = false;
      this.siftDown(0, this.n, t, seq, kind, ref);
      return;
    }
    if (this.n === this.t.length) this.grow();
    const ts = this.t;
    const seqs = this.seq;
    const kinds = this.kind;
    const refs = this.ref;
    let i = this.n++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const pt = ts[p] as number;
      if (pt < t || (pt === t && (seqs[p] as number) < seq)) break;
      ts[i] = pt;
      seqs[i] = seqs[p] as number;
      kinds[i] = kinds[p] as number;
      refs[i] = refs[p];
      i = p;
    }
    ts[i] = t;
    seqs[i] = seq;
    kinds[i] = kind;
    refs[i] = ref;
  }

  /** Remove the earliest event (read it first with topT/topKind/topRef). */
  pop(): void {
    if (this.n === 0) return;
    const n = --this.n;
    const refs = this.ref;
    if (n === 0) {
      refs[0] = null;
      return;
    }
    // The last event moves down from the root's place.
    const lr = refs[n];
    refs[n] = null;
    this.siftDown(0, n, this.t[n] as number, this.seq[n] as number, this.kind[n] as number, lr);
  }

  /** Put an event at place i of a heap of n and move it down to where it belongs. */
  private siftDown(i: number, n: number, lt: number, ls: number, lk: number, lr: unknown): void {
    const ts = this.t;
    const seqs = this.seq;
    const kinds = this.kind;
    const refs = this.ref;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      let c = l;
      let ct = ts[l] as number;
      let cs = seqs[l] as number;
      if (r < n) {
        const rt = ts[r] as number;
        const rs = seqs[r] as number;
        if (rt < ct || (rt === ct && rs < cs)) {
          c = r;
          ct = rt;
          cs = rs;
        }
      }
      if (lt < ct || (lt === ct && ls < cs)) break;
      ts[i] = ct;
      seqs[i] = cs;
      kinds[i] = kinds[c] as number;
      refs[i] = refs[c];
      i = c;
    }
    ts[i] = lt;
    seqs[i] = ls;
    kinds[i] = lk;
    refs[i] = lr;
  }

  private grow(): void {
    const size = this.t.length * 2;
    const t = new Float64Array(size);
    t.set(this.t);
    const seq = new Float64Array(size);
    seq.set(this.seq);
    const kind = new Uint8Array(size);
    kind.set(this.kind);
    this.t = t;
    this.seq = seq;
    this.kind = kind;
    for (let i = this.ref.length; i < size; i++) this.ref.push(null);
  }
}
