/**
 * The simulator's event queue: a binary min-heap ordered by (time, sequence number). The sequence
 * number makes ties resolve in insertion order, so a run is deterministic for a seed.
 */
export interface HeapEvent {
  t: number;
  seq: number;
}

export class EventHeap<E extends HeapEvent> {
  private readonly items: E[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): E | undefined {
    return this.items[0];
  }

  push(e: E): void {
    const a = this.items;
    a.push(e);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = a[p] as E;
      if (parent.t < e.t || (parent.t === e.t && parent.seq < e.seq)) break;
      a[i] = parent;
      i = p;
    }
    a[i] = e;
  }

  pop(): E | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (top === undefined || last === undefined || a.length === 0) return top;
    const n = a.length;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      let c = l;
      let ce = a[l] as E;
      if (r < n) {
        const re = a[r] as E;
        if (re.t < ce.t || (re.t === ce.t && re.seq < ce.seq)) {
          c = r;
          ce = re;
        }
      }
      if (last.t < ce.t || (last.t === ce.t && last.seq < ce.seq)) break;
      a[i] = ce;
      i = c;
    }
    a[i] = last;
    return top;
  }
}
