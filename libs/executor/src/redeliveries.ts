/**
 * The stream sequences of the queries an instance answered lately. JetStream delivers a query again
 * when its ack did not reach the consumer's leader (the leader's NATS node lost: the ack went with it,
 * test/fault-nats-cluster.test.ts) or it outlived the ack wait; a redelivery of a query answered here
 * is acked and dropped instead of being run and answered a second time. Bounded: the oldest of
 * `capacity` sequences are forgotten (a redelivery comes within seconds, one ack wait after the loss).
 */
export class RecentSequences {
  private readonly seen = new Set<number>();
  private readonly ring: number[];
  private next = 0;

  constructor(readonly capacity = 4096) {
    if (!(capacity >= 1)) throw new Error(`RecentSequences needs a capacity of at least 1 (got ${capacity})`);
    this.ring = new Array<number>(capacity);
  }

  add(seq: number): void {
    if (this.seen.has(seq)) return;
    const old = this.ring[this.next];
    if (old !== undefined) this.seen.delete(old);
    this.ring[this.next] = seq;
    this.next = (this.next + 1) % this.capacity;
    this.seen.add(seq);
  }

  has(seq: number): boolean {
    return this.seen.has(seq);
  }

  get size(): number {
    return this.seen.size;
  }
}
