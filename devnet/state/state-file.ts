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
  // History is written by this module and re-checked on load (the head block must hash to its
  // stored hash and its state root must match the restored state), so its shape is only sketched.
  blocks: z
    .array(
      z.looseObject({
        header: z.looseObject({ number: quantityHex, hash: hex, stateRoot: hex }),
        transactions: z.array(z.looseObject({ hash: hex })),
        receipts: z.array(z.looseObject({ transactionHash: hex })),
      }),
    )
    .min(1),
});

/** The snapshot in `file`, or undefined when the file does not exist. */
export async function readStateFile(file: string): Promise<StateSnapshot | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const parsed = fileSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${file} is not a devnet state file: ${parsed.error.message}`);
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
    blocks: body.blocks as unknown as MinedBlock[],
  };
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
