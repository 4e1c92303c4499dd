/**
 * A state journal record (state-journal.ts): what a group of commits changed since the state was
 * last written. The keyed maps (state-wire.ts KEYED_MAPS), which grow with the keys active in a day,
 * are written as the entries their TrackedMaps saw touched; the rest of the state, small and bounded,
 * is written whole whenever its bytes differ from the last written. A record is CBOR:
 *   { rest?: bytes (the CBOR of the state with its keyed maps empty),
 *     maps: { <name>?: { reset: bool, set: { key: entry }, del: [key] } } }
 * where `reset` empties the map before the set, for a map emptied or replaced (a new day).
 */
import * as z from "zod";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import type { EnclaveState } from "./enclave-state.ts";
import { SealError } from "./sealing.ts";
import type { Persisted } from "./state-versions.ts";
import { KEYED_MAP_NAMES, KEYED_MAPS, restToWire } from "./state-wire.ts";
import type { TrackedMap } from "./tracked-map.ts";

// Key refs and addresses: plain names, so that applying a record sets no property of Object's.
const keySchema = z.string().regex(/^[0-9A-Za-z]{1,128}$/);
const mapChangeSchema = z.object({
  reset: z.boolean(),
  set: z.record(keySchema, z.unknown()),
  del: z.array(keySchema),
});
type MapChange = z.infer<typeof mapChangeSchema>;
const recordSchema = z.object({
  rest: z.instanceof(Uint8Array).optional(),
  maps: z.object(Object.fromEntries(KEYED_MAP_NAMES.map((name) => [name, mapChangeSchema.optional()]))),
});

/** Follows one state's changes from one write to the next, for the store. */
export class ChangeTracker {
  private rest: Uint8Array = new Uint8Array();
  /** The keyed maps as last written: one replaced since (a new day) is written whole. */
  private maps: Array<TrackedMap<string, unknown>> = [];

  constructor(state: EnclaveState) {
    this.written(state);
  }

  /** The whole state was just written (or read): changes count from here. */
  written(state: EnclaveState): void {
    this.rest = encodeCbor(restToWire(state));
    this.maps = KEYED_MAPS.map((map) => {
      const live = map.live(state);
      live.takeChanges();
      return live;
    });
  }

  /** The record of what changed since the last write, encoded; changes count anew from here. */
  take(state: EnclaveState): Uint8Array {
    const record: { rest?: Uint8Array; maps: Partial<Record<string, MapChange>> } = { maps: {} };
    const rest = encodeCbor(restToWire(state));
    if (!Buffer.from(rest.buffer, rest.byteOffset, rest.length).equals(this.rest)) {
      record.rest = rest;
      this.rest = rest;
    }
    KEYED_MAPS.forEach((map, index) => {
      const live = map.live(state);
      const { cleared, touched } = live.takeChanges();
      const reset = cleared || live !== this.maps[index];
      this.maps[index] = live;
      const change: MapChange = { reset, set: {}, del: [] };
      for (const key of reset ? live.keys() : touched) {
        const value = live.get(key);
        if (value === undefined) change.del.push(key);
        else change.set[key] = map.toWire(value);
      }
      if (reset || change.del.length > 0 || Object.keys(change.set).length > 0)
        record.maps[map.name] = change;
    });
    return encodeCbor(record);
  }
}

/**
 * `persisted` with a record applied (it is changed in place, or replaced when the record holds the
 * rest). The result is not checked against the state's schema: the caller parses it once all
 * records are applied.
 */
export function applyChanges(persisted: Persisted, recordBytes: Uint8Array): Persisted {
  const parsed = recordSchema.safeParse(decodeCbor(recordBytes));
  if (!parsed.success) throw new SealError("state journal record does not parse");
  const record = parsed.data;
  let next = persisted;
  if (record.rest) {
    next = decodeCbor(record.rest) as Persisted;
    for (const map of KEYED_MAPS) Object.assign(map.wire(next), map.wire(persisted));
  }
  for (const map of KEYED_MAPS) {
    const change = record.maps[map.name] as MapChange | undefined;
    if (!change) continue;
    const entries = map.wire(next);
    if (change.reset) for (const key of Object.keys(entries)) delete entries[key];
    for (const key of change.del) delete entries[key];
    Object.assign(entries, change.set);
  }
  return next;
}
