import type { Logger } from "@sloserve/bus";
import type { ProviderEvent } from "./types.js";

/**
 * The listeners of one provider's events. A listener that throws does not stop the others, nor the
 * provider: its error is logged with the event.
 */
export class ProviderEvents {
  private readonly listeners: Array<(event: ProviderEvent) => void> = [];

  constructor(
    private readonly provider: string,
    private readonly log: Logger,
  ) {}

  on(listener: (event: ProviderEvent) => void): void {
    this.listeners.push(listener);
  }

  emit(event: ProviderEvent): void {
    this.log.info({ provider: this.provider, ...event }, `worker ${event.type}`);
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.log.error({ err, provider: this.provider, event }, "a provider event listener threw");
      }
    }
  }
}
