/**
 * A resource enters the discovery catalogue when a payment naming it settles
 * (docs/x402.md#discovery-the-resource-catalogue): in the outbox's statement that records the
 * settlement's receipt (outbox/followers.ts), beside settlementsFollower, so the catalogue never
 * lists a resource whose payment was only verified, claimed or sent, and never misses one that
 * settled, whichever process recorded the receipt (the settle itself, the tracker after a restart).
 * The statement reads the settlement rows as they were when it began (the resource columns never
 * change after the claim). A resource already listed is left as it is: `do nothing` takes no row
 * lock, so settlements naming one resource never queue on its row.
 */
import { sql } from "drizzle-orm";
import type { OutboxDomains } from "../../outbox/index.ts";

export const settledResourcesFollower: OutboxDomains["followers"][number] = {
  name: "resources",
  moved: sql`insert into x402_resources (url, description, mime_type, source)
    select distinct on (x.resource_url) x.resource_url, coalesce(x.resource_description, ''),
      x.resource_mime_type, 'settled'
    from moved m join x402_settlements x on x.tx_id = m.tx_id
    where m.status = 'confirmed' and x.resource_url is not null
    order by x.resource_url
    on conflict (url) do nothing`,
};
