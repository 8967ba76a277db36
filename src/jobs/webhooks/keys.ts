/**
 * Names of the webhook machinery's queues and Redis keys (README: Webhooks). Tenant-wide keys
 * carry the tenant's hash tag {<tenant>} as src/store/keys.ts does for the tenant's meta hash;
 * BullMQ queues use the prefix {laurel-jobs}, like the time triggers.
 *
 *   {t}:wh:co      hash   coalesced events waiting for their window to close:
 *                          "<coalesce key>|f" and "|l" → "<stream id> <payload>" (first and last change)
 *   {t}:wh:cod     zset   coalesce keys by the instant (ms, service clock) their window closes
 *   {t}:wh:due     zset   user boost boundaries (JSON members) by instant
 *   {t}:wh:cursor  zset   member "c": the service instant up to which calendar boundaries were emitted
 *   {t}:wh:bounds  hash   the tenant file's edit-prone boundaries as the last tick read them ("v" → "1",
 *                          "g:<boost id>" → "<start> <end>", "b:<board>" → "<end> <announced up to>", ms or "-"), and
 *                          "s:<type>|<subject>" → the instant a boundary announced and then moved
 *                          was last announced at (timeline.ts, boundaries.ts editedBoundaries)
 */
export const JOBS_PREFIX = "{laurel-jobs}";
export const WEBHOOK_GROUP = "webhooks";

export const deliveryQueueName = (tenantId: string): string => `laurel-hooks-${tenantId}`;
export const timelineQueueName = (tenantId: string): string => `laurel-hooks-time-${tenantId}`;

export class WebhookKeys {
  constructor(readonly tenantId: string) {}

  coalesced(): string {
    return `{${this.tenantId}}:wh:co`;
  }

  coalesceDue(): string {
    return `{${this.tenantId}}:wh:cod`;
  }

  boostDue(): string {
    return `{${this.tenantId}}:wh:due`;
  }

  cursor(): string {
    return `{${this.tenantId}}:wh:cursor`;
  }

  bounds(): string {
    return `{${this.tenantId}}:wh:bounds`;
  }
}

/** BullMQ job ids may not contain ":"; an event id is a 36-character uuid, so "<event id>.<endpoint>" is unambiguous. */
export const deliveryId = (eventId: string, endpointKey: string): string => `${eventId}.${endpointKey}`;
