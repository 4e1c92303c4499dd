/**
 * Gives V8 flags to the workerd process Miniflare starts. workerd takes them only from its config
 * (`Config.v8Flags` of workerd.capnp), and Miniflare 4.20260401 has no option for them (later
 * releases read MINIFLARE_WORKERD_V8_FLAGS, but they need Node 22). So while Miniflare starts,
 * `child_process.spawn` is wrapped: for the workerd child only, the binary Cap'n Proto config that
 * Miniflare writes to its stdin gets the flags, in a segment appended to the message.
 */
import childProcess, { type ChildProcess } from "node:child_process";
import path from "node:path";

/** `v8Flags` is the third pointer field of workerd.capnp's `Config` (services, sockets, v8Flags). */
const V8_FLAGS_POINTER = 2;

const ELEMENT_BYTE = 2n;
const ELEMENT_POINTER = 6n;

/** A Cap'n Proto list pointer (kind 1): `offset` words from the end of the pointer's own word. */
function listPointer(offset: number, elementSize: bigint, count: number): bigint {
  return (BigInt(count) << 35n) | (elementSize << 32n) | (BigInt.asUintN(30, BigInt(offset)) << 2n) | 1n;
}

/**
 * Returns `message` (a framed, unpacked Cap'n Proto message whose root is a workerd `Config`) with
 * `flags` as its `v8Flags`. Throws if the message is not shaped so or already carries flags.
 */
export function configWithV8Flags(message: Uint8Array, flags: readonly string[]): Uint8Array {
  const input = new DataView(message.buffer, message.byteOffset, message.byteLength);
  const segmentCount = input.getUint32(0, true) + 1;
  const headerBytes = Math.ceil((4 * (1 + segmentCount)) / 8) * 8;
  const root = input.getBigUint64(headerBytes, true);
  if ((root & 3n) !== 0n) throw new Error("workerd config: the root pointer is not a struct pointer");
  const rootOffset = Number(BigInt.asIntN(30, root >> 2n));
  const dataWords = Number((root >> 32n) & 0xffffn);
  const pointerCount = Number(root >> 48n);
  if (pointerCount <= V8_FLAGS_POINTER)
    throw new Error("workerd config: the root struct has no v8Flags field");
  const slot = headerBytes + 8 * (1 + rootOffset + dataWords + V8_FLAGS_POINTER);
  if (input.getBigUint64(slot, true) !== 0n) throw new Error("workerd config: v8Flags is already set");

  // The new segment: a landing pad (a list pointer to the text pointers that follow it), one
  // pointer per flag, then each flag as Text (UTF-8 with a NUL, padded to a word).
  const texts = flags.map((flag) => new TextEncoder().encode(`${flag}\0`));
  const textWords = texts.map((text) => Math.ceil(text.length / 8));
  const segmentWords = 1 + texts.length + textWords.reduce((sum, words) => sum + words, 0);
  const segment = new Uint8Array(segmentWords * 8);
  const segmentView = new DataView(segment.buffer);
  segmentView.setBigUint64(0, listPointer(0, ELEMENT_POINTER, texts.length), true);
  let textAt = 1 + texts.length;
  texts.forEach((text, index) => {
    const pointerAt = 1 + index;
    segmentView.setBigUint64(
      pointerAt * 8,
      listPointer(textAt - pointerAt - 1, ELEMENT_BYTE, text.length),
      true,
    );
    segment.set(text, textAt * 8);
    textAt += textWords[index]!;
  });

  const newHeaderBytes = Math.ceil((4 * (2 + segmentCount)) / 8) * 8;
  const output = new Uint8Array(newHeaderBytes + (message.byteLength - headerBytes) + segment.byteLength);
  const view = new DataView(output.buffer);
  view.setUint32(0, segmentCount, true);
  for (let i = 0; i < segmentCount; i++) view.setUint32(4 + 4 * i, input.getUint32(4 + 4 * i, true), true);
  view.setUint32(4 + 4 * segmentCount, segmentWords, true);
  output.set(message.subarray(headerBytes), newHeaderBytes);
  output.set(segment, newHeaderBytes + (message.byteLength - headerBytes));
  // A far pointer (kind 2) to the landing pad at word 0 of the new segment.
  view.setBigUint64(newHeaderBytes + (slot - headerBytes), (BigInt(segmentCount) << 32n) | 2n, true);
  return output;
}

function isWorkerdServe(command: unknown, args: unknown): boolean {
  return (
    typeof command === "string" &&
    path.basename(command) === "workerd" &&
    Array.isArray(args) &&
    args[0] === "serve" &&
    args.includes("--binary")
  );
}

/** `spawn` as it was, and who is using the wrapped one (edges may start side by side). */
let installed: { original: typeof childProcess.spawn; flags: string; users: number } | undefined;

function wrapSpawn(original: typeof childProcess.spawn, flags: readonly string[]): typeof childProcess.spawn {
  return ((...spawnArgs: unknown[]): ChildProcess => {
    const child = Reflect.apply(original, childProcess, spawnArgs) as ChildProcess;
    const stdin = child.stdin;
    if (!isWorkerdServe(spawnArgs[0], spawnArgs[1]) || !stdin) return child;
    // Miniflare writes the whole config in one call, then ends stdin.
    const write = stdin.write.bind(stdin) as (chunk: unknown, ...rest: unknown[]) => boolean;
    let first = true;
    stdin.write = ((chunk: unknown, ...rest: unknown[]): boolean => {
      if (!first || !(chunk instanceof Uint8Array)) return write(chunk, ...rest);
      first = false;
      return write(configWithV8Flags(chunk, flags), ...rest);
    }) as typeof stdin.write;
    return child;
  }) as typeof childProcess.spawn;
}

/**
 * Runs `start` (which starts Miniflare and waits until it is ready) with every workerd child spawned
 * meanwhile given `flags`; other spawns pass untouched. Miniflare spawns workerd again only when
 * its options change, which the local edge never does.
 */
export async function withWorkerdV8Flags<T>(flags: readonly string[], start: () => Promise<T>): Promise<T> {
  const key = JSON.stringify(flags);
  if (installed && installed.flags !== key) {
    throw new Error(`workerd V8 flags ${key} asked for while ${installed.flags} are being given`);
  }
  if (!installed) {
    installed = { original: childProcess.spawn, flags: key, users: 0 };
    childProcess.spawn = wrapSpawn(installed.original, flags);
  }
  installed.users += 1;
  try {
    return await start();
  } finally {
    installed.users -= 1;
    if (installed.users === 0) {
      childProcess.spawn = installed.original;
      installed = undefined;
    }
  }
}
