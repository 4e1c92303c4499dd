/**
 * `--state FILE`: the whole chain (accounts with code and storage, and mined history) as one JSON
 * document, written atomically (temporary file, fsync, rename) so a crash mid-save leaves the
 * previous file intact.
 */
import { randomBytes } from "node:crypto";
import { mkdir, open, readFile, rename, rm } from "node:fs/promises";
import path from "node:path";
import { hexToBytes } from "@ethereumjs/util";
import * as z from "zod";
import { errorMessage } from "../../shared/error-message.ts";
import { data, type Hex, quantity } from "../hex.ts";
import type { MinedBlock } from "../rpc/types.ts";
import type { AccountDump } from "./tracking-state-manager.ts";

export const STATE_FILE_FORMAT = "agent-wallet-devnet-state/1";

/** Blocks are written in pieces of about this many characters. */
const WRITE_CHUNK_CHARS = 1 << 20;

export type StateSnapshot = {
  chainId: number;
  operatorPool: Hex;
  accounts: AccountDump[];
  /** Oldest first; read one at a time when written, since older blocks live in the history file. */
  blocks: Iterable<MinedBlock>;
};

const hex = z.string().regex(/^0x[0-9a-fA-F]*$/);
const quantityHex = z.string().regex(/^0x[0-9a-fA-F]+$/);

const blockSchema = z.looseObject({
  header: z.looseObject({ number: quantityHex, hash: hex, stateRoot: hex }),
  transactions: z.array(z.looseObject({ hash: hex })),
  receipts: z.array(z.looseObject({ transactionHash: hex })),
});

/** The document without its blocks, which are read one at a time (see readStateFile). */
const fileSchema = z.object({
  format: z.literal(STATE_FILE_FORMAT),
  chainId: z.number().int(),
  operatorPool: z.string().regex(/^0x[0-9a-fA-F]{40}$/),
  savedAt: z.string(),
  accounts: z.array(
    z.object({
      address: z.string().regex(/^0x[0-9a-f]{40}$/),
      nonce: quantityHex,
      balance: quantityHex,
      code: hex,
      storage: z.record(z.string().regex(/^0x[0-9a-f]{64}$/), quantityHex),
    }),
  ),
  blocks: z.array(z.never()).length(0),
});

/**
 * The snapshot in `file`, or undefined when the file does not exist. The file is read as bytes
 * and its blocks parsed one at a time as the chain takes them: a long history makes a file larger
 * than the longest string V8 can hold (about 512 MiB, some 100,000 settlements), which a read
 * as one string could not load at all.
 */
export async function readStateFile(file: string): Promise<StateSnapshot | undefined> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const notStateFile = (detail: string): Error => new Error(`${file} is not a devnet state file: ${detail}`);
  const layout = blocksLayout(bytes);
  if (layout === undefined) throw notStateFile("no blocks array");
  if (layout.blocks.length === 0) throw notStateFile("the blocks array is empty");
  let document: unknown;
  try {
    document = JSON.parse(
      `${bytes.toString("utf8", 0, layout.open)}[]${bytes.toString("utf8", layout.close + 1)}`,
    );
  } catch (error) {
    throw notStateFile(errorMessage(error));
  }
  const parsed = fileSchema.safeParse(document);
  if (!parsed.success) throw notStateFile(parsed.error.message);
  const body = parsed.data;
  return {
    chainId: body.chainId,
    operatorPool: body.operatorPool as Hex,
    accounts: body.accounts.map((account) => ({
      address: account.address as Hex,
      nonce: BigInt(account.nonce),
      balance: BigInt(account.balance),
      code: hexToBytes(account.code as Hex),
      storage: Object.entries(account.storage).map(([slot, value]): [Uint8Array, Uint8Array] => [
        hexToBytes(slot as Hex),
        hexToBytes(evenHex(value)),
      ]),
    })),
    blocks: (function* () {
      for (const [start, end] of layout.blocks) {
        let block: unknown;
        try {
          block = JSON.parse(bytes.toString("utf8", start, end));
        } catch (error) {
          throw notStateFile(errorMessage(error));
        }
        // Written by this module and re-checked on load (the head block must hash to its stored
        // hash and its state root must match the restored state), so its shape is only sketched.
        const checked = blockSchema.safeParse(block);
        if (!checked.success) throw notStateFile(checked.error.message);
        yield block as MinedBlock;
      }
    })(),
  };
}

/**
 * Where the top-level "blocks" array opens and closes in a JSON document, and the byte range of
 * each of its elements; undefined when there is none. A scan of the bytes that follows strings and
 * nesting: UTF-8 continuation bytes are all above 0x7f, so never a quote, backslash or bracket.
 */
function blocksLayout(
  bytes: Buffer,
): { open: number; close: number; blocks: Array<[number, number]> } | undefined {
  const QUOTE = 0x22;
  const BACKSLASH = 0x5c;
  let depth = 0;
  let inString = false;
  let stringStart = 0;
  let lastKey = "";
  let open = -1;
  let elementStart = -1;
  const blocks: Array<[number, number]> = [];
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (inString) {
      // To the closing quote at memchr's speed (a block's hex data makes long strings): the next
      // quote that an odd run of backslashes does not escape.
      let quote = bytes.indexOf(QUOTE, i);
      for (;;) {
        if (quote < 0) return undefined;
        let backslashes = 0;
        while (bytes[quote - 1 - backslashes] === BACKSLASH) backslashes++;
        if (backslashes % 2 === 0) break;
        quote = bytes.indexOf(QUOTE, quote + 1);
      }
      i = quote;
      inString = false;
      if (depth === 1) lastKey = bytes.toString("utf8", stringStart, i);
      continue;
    }
    if (byte === QUOTE) {
      inString = true;
      stringStart = i + 1;
    } else if (byte === 0x7b || byte === 0x5b) {
      // { or [
      if (depth === 1 && byte === 0x5b && lastKey === "blocks" && open < 0) open = i;
      else if (depth === 2 && open >= 0 && elementStart < 0) elementStart = i;
      depth++;
    } else if (byte === 0x7d || byte === 0x5d) {
      // } or ]
      depth--;
      if (depth === 2 && elementStart >= 0) {
        blocks.push([elementStart, i + 1]);
        elementStart = -1;
      } else if (depth === 1 && open >= 0 && byte === 0x5d) {
        return { open, close: i, blocks };
      }
    }
  }
  return undefined;
}

export async function writeStateFile(file: string, snapshot: StateSnapshot): Promise<void> {
  const body = {
    format: STATE_FILE_FORMAT,
    chainId: snapshot.chainId,
    operatorPool: snapshot.operatorPool,
    savedAt: new Date().toISOString(),
    accounts: snapshot.accounts.map((account) => ({
      address: account.address,
      nonce: quantity(account.nonce),
      balance: quantity(account.balance),
      code: data(account.code),
      storage: Object.fromEntries(account.storage.map(([slot, value]) => [data(slot), data(value)])),
    })),
  };
  await mkdir(path.dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    const handle = await open(temporary, "w", 0o600);
    try {
      // The document is written in pieces: the blocks, one by one, after everything else, so
      // the whole history never sits in memory as one string.
      const head = JSON.stringify({ ...body, blocks: [] });
      await handle.write(`${head.slice(0, -"[]}".length)}[`);
      let chunk = "";
      let first = true;
      for (const block of snapshot.blocks) {
        chunk += `${first ? "" : ","}${JSON.stringify(block)}`;
        first = false;
        if (chunk.length >= WRITE_CHUNK_CHARS) {
          await handle.write(chunk);
          chunk = "";
        }
      }
      await handle.write(`${chunk}]}`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

function evenHex(value: string): Hex {
  const digits = value.slice(2);
  return `0x${digits.length % 2 === 0 ? digits : `0${digits}`}`;
}
