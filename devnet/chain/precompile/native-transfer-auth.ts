/**
 * NativeTransferAuth: an EIP-3009-shaped interface over native balances, registered
 * as a custom precompile of @ethereumjs/evm. value is in 6-decimal units and moves
 * value × 10^12 wei from `from` to `to`; it never creates wei, so it cannot mint.
 *
 * Used authorizations are flags in the precompile account's storage, laid out as Solidity lays
 * out `mapping(address => mapping(bytes32 => bool))` at slot 0. Living in EVM state, they are
 * rolled back with a reverted call, committed with the block, and saved with the state file.
 */
import { EVMError, type ExecResult, type Log, type Message, type PrecompileInput } from "@ethereumjs/evm";
import { Account, Address, equalsBytes, hexToBytes } from "@ethereumjs/util";
import {
  EIP712_DOMAIN_NAME,
  EIP712_DOMAIN_VERSION,
  NATIVE_DECIMALS,
  WEI_PER_UNIT,
} from "../../../shared/constants.ts";
import { authorizationDigest, domainSeparator } from "../../../shared/eip712.ts";
import { authorizationSlot } from "../../../shared/native-transfer-auth.ts";
import { ok, type Result } from "../../../shared/result.ts";
import type { Ecrecover, RecoveryInput } from "../signature-recovery.ts";
import {
  AUTHORIZATION_USED_TOPIC,
  FUNCTION_BY_SELECTOR,
  type PrecompileFunction,
  TRANSFER_TOPIC,
} from "./abi.ts";
import {
  AbiArgs,
  encodeAddress,
  encodeBool,
  encodeErrorString,
  encodeString,
  encodeUint,
} from "./abi-words.ts";
import { REVERT_REASONS, type RevertReason } from "./reasons.ts";
import {
  recoverSigner,
  type SignatureFailure,
  type SignatureParts,
  signerRecoveryInput,
  splitSignature,
} from "./signature.ts";

/**
 * Fixed gas per call, on top of the transaction's intrinsic gas. A transfer is priced like the
 * work an EIP-3009 token does: ecrecover (3,000), a fresh nonce slot (22,100), two balance
 * writes and two logs, so about what USDC's transferWithAuthorization costs.
 */
export const TRANSFER_GAS = 40_000n;
/** A view: one cold account or storage read. */
export const VIEW_GAS = 2_600n;

const GAS: Record<PrecompileFunction, bigint> = {
  transferWithAuthorizationVrs: TRANSFER_GAS,
  transferWithAuthorizationBytes: TRANSFER_GAS,
  authorizationState: VIEW_GAS,
  balanceOf: VIEW_GAS,
  name: VIEW_GAS,
  version: VIEW_GAS,
  decimals: VIEW_GAS,
  domainSeparator: VIEW_GAS,
};

const USED_FLAG = Uint8Array.of(1);
const EMPTY = new Uint8Array(0);
const AUTHORIZATION_USED = hexToBytes(AUTHORIZATION_USED_TOPIC);
const TRANSFER = hexToBytes(TRANSFER_TOPIC);

export type NativeTransferAuthConfig = {
  address: Address;
  /** The genesis bridge operator, barred as `from`. */
  operatorPool: Address;
  chainId: bigint;
  /** Timestamp of the block being executed; the chain sets it under its lock before every EVM run. */
  blockTimestamp(): bigint;
  /** Public-key recovery; default signature-recovery.ts's ecrecover. */
  ecrecover?: Ecrecover;
};

export type NativeTransferAuth = {
  readonly address: Address;
  /** The PrecompileFunc to register under `address`. */
  run(input: PrecompileInput): Promise<ExecResult>;
  /**
   * Must be subscribed to the EVM's `beforeMessage` event. A precompile is not told its caller's
   * value, static flag or call kind, so it learns them from the message the EVM announces right
   * before running it.
   */
  observeMessage(message: Message): void;
};

type CallContext = { value: bigint; isStatic: boolean; delegated: boolean };

export function createNativeTransferAuth(config: NativeTransferAuthConfig): NativeTransferAuth {
  const self = config.address;
  const separator = domainSeparator(config.chainId, self.bytes);
  let pending: CallContext | undefined;

  const observeMessage = (message: Message): void => {
    const to = message.to;
    if (to === undefined || !message.codeAddress.equals(self)) return;
    pending = {
      value: message.value,
      isStatic: message.isStatic,
      // DELEGATECALL and CALLCODE run our code for another account: never let that write.
      delegated: message.delegatecall || !to.equals(self),
    };
  };

  const run = async (input: PrecompileInput): Promise<ExecResult> => {
    const call = pending;
    pending = undefined;
    const fn = input.data.length >= 4 ? FUNCTION_BY_SELECTOR.get(readSelector(input.data)) : undefined;
    const gas = fn === undefined ? VIEW_GAS : GAS[fn];
    if (input.gasLimit < gas) return outOfGas(input.gasLimit);
    // No fallback and no receive: unknown selectors and plain transfers revert without data.
    if (fn === undefined) return revert(gas, EMPTY);
    if (call === undefined) return revertWith(gas, REVERT_REASONS.missingContext);
    if (call.value > 0n) return revertWith(gas, REVERT_REASONS.nonPayable);
    const args = new AbiArgs(input.data.subarray(4));
    const state = input._EVM.stateManager;

    switch (fn) {
      case "name":
        return success(gas, encodeString(EIP712_DOMAIN_NAME));
      case "version":
        return success(gas, encodeString(EIP712_DOMAIN_VERSION));
      case "decimals":
        return success(gas, encodeUint(BigInt(NATIVE_DECIMALS)));
      case "domainSeparator":
        return success(gas, separator);
      case "balanceOf": {
        const account = args.address(0);
        if (account === undefined) return revert(gas, EMPTY);
        const balance = (await state.getAccount(new Address(account.slice())))?.balance ?? 0n;
        return success(gas, encodeUint(balance / WEI_PER_UNIT));
      }
      case "authorizationState": {
        const authorizer = args.address(0);
        const nonce = args.word(1);
        if (authorizer === undefined || nonce === undefined) return revert(gas, EMPTY);
        const used = await state.getStorage(self, authorizationSlot(authorizer, nonce));
        return success(gas, encodeBool(used.some((byte) => byte !== 0)));
      }
      case "transferWithAuthorizationVrs": {
        const v = args.uint8(6);
        const r = args.uint(7);
        const s = args.uint(8);
        if (v === undefined || r === undefined || s === undefined) return revert(gas, EMPTY);
        return transfer(args, ok({ v, r, s }), input, call, gas);
      }
      case "transferWithAuthorizationBytes": {
        const signature = args.bytes(6);
        if (signature === undefined) return revert(gas, EMPTY);
        return transfer(args, splitSignature(signature), input, call, gas);
      }
    }
  };

  const transfer = async (
    args: AbiArgs,
    signature: Result<SignatureParts, SignatureFailure>,
    input: PrecompileInput,
    call: CallContext,
    gas: bigint,
  ): Promise<ExecResult> => {
    const fields = args.head(6);
    const from = args.address(0);
    const to = args.address(1);
    const value = args.uint(2);
    const validAfter = args.uint(3);
    const validBefore = args.uint(4);
    const nonce = args.word(5);
    if (
      fields === undefined ||
      from === undefined ||
      to === undefined ||
      value === undefined ||
      validAfter === undefined ||
      validBefore === undefined ||
      nonce === undefined
    ) {
      return revert(gas, EMPTY);
    }
    if (call.isStatic) return revertWith(gas, REVERT_REASONS.staticCall);
    if (call.delegated) return revertWith(gas, REVERT_REASONS.delegateCall);
    if (equalsBytes(from, config.operatorPool.bytes)) return revertWith(gas, REVERT_REASONS.operatorPool);

    // EIP-3009: valid strictly after validAfter and strictly before validBefore.
    const now = config.blockTimestamp();
    if (now <= validAfter) return revertWith(gas, REVERT_REASONS.notYetValid);
    if (now >= validBefore) return revertWith(gas, REVERT_REASONS.expired);

    const state = input._EVM.stateManager;
    const slot = authorizationSlot(from, nonce);
    const used = await state.getStorage(self, slot);
    if (used.some((byte) => byte !== 0)) return revertWith(gas, REVERT_REASONS.used);

    if (!signature.ok) return revertWith(gas, signatureReason(signature.error));
    const signer = recoverSigner(authorizationDigest(separator, fields), signature.value, config.ecrecover);
    if (!signer.ok) return revertWith(gas, signatureReason(signer.error));
    if (!equalsBytes(signer.value, from)) return revertWith(gas, REVERT_REASONS.invalidSignature);

    if (to.every((byte) => byte === 0)) return revertWith(gas, REVERT_REASONS.zeroRecipient);
    if (equalsBytes(to, self.bytes)) return revertWith(gas, REVERT_REASONS.precompileRecipient);

    const amount = value * WEI_PER_UNIT;
    const fromAddress = new Address(from.slice());
    const fromAccount = (await state.getAccount(fromAddress)) ?? new Account();
    if (fromAccount.balance < amount) return revertWith(gas, REVERT_REASONS.insufficientBalance);

    await state.putStorage(self, slot, USED_FLAG);
    fromAccount.balance -= amount;
    await input._EVM.journal.putAccount(fromAddress, fromAccount);
    // Read `to` after writing `from`, so a transfer to oneself nets to zero.
    const toAddress = new Address(to.slice());
    const toAccount = (await state.getAccount(toAddress)) ?? new Account();
    toAccount.balance += amount;
    await input._EVM.journal.putAccount(toAddress, toAccount);

    const logs: Log[] = [
      [self.bytes, [AUTHORIZATION_USED, encodeAddress(from), nonce.slice()], EMPTY],
      [self.bytes, [TRANSFER, encodeAddress(from), encodeAddress(to)], encodeUint(value)],
    ];
    return success(gas, EMPTY, logs);
  };

  return { address: self, run, observeMessage };
}

/**
 * The ecrecover input a transferWithAuthorization call in `data` leads to, so that a worker can
 * recover it before the transaction runs. Undefined for any other call, and for one refused
 * before recovery (malformed arguments, high S, bad v). It parses exactly as `run` does; were
 * the two ever to differ, the precompile would just recover on the spot.
 */
export function authorizationRecoveryInput(
  separator: Uint8Array,
  data: Uint8Array,
): RecoveryInput | undefined {
  const fn = data.length >= 4 ? FUNCTION_BY_SELECTOR.get(readSelector(data)) : undefined;
  if (fn !== "transferWithAuthorizationVrs" && fn !== "transferWithAuthorizationBytes") return undefined;
  const args = new AbiArgs(data.subarray(4));
  const fields = args.head(6);
  if (fields === undefined) return undefined;
  let parts: SignatureParts;
  if (fn === "transferWithAuthorizationVrs") {
    const v = args.uint8(6);
    const r = args.uint(7);
    const s = args.uint(8);
    if (v === undefined || r === undefined || s === undefined) return undefined;
    parts = { v, r, s };
  } else {
    const signature = args.bytes(6);
    const split = signature === undefined ? undefined : splitSignature(signature);
    if (split === undefined || !split.ok) return undefined;
    parts = split.value;
  }
  return signerRecoveryInput(authorizationDigest(separator, fields), parts);
}

function signatureReason(failure: SignatureFailure): RevertReason {
  switch (failure) {
    case "invalid_signature_length":
      return REVERT_REASONS.invalidSignatureLength;
    case "invalid_s":
      return REVERT_REASONS.invalidS;
    case "invalid_v":
      return REVERT_REASONS.invalidV;
    case "invalid_signature":
      return REVERT_REASONS.invalidSignature;
  }
}

function readSelector(data: Uint8Array): number {
  return new DataView(data.buffer, data.byteOffset, 4).getUint32(0);
}

function success(gas: bigint, returnValue: Uint8Array, logs?: Log[]): ExecResult {
  return { executionGasUsed: gas, returnValue, logs };
}

function revert(gas: bigint, returnValue: Uint8Array): ExecResult {
  return { executionGasUsed: gas, returnValue, exceptionError: new EVMError(EVMError.errorMessages.REVERT) };
}

function revertWith(gas: bigint, reason: RevertReason): ExecResult {
  return revert(gas, encodeErrorString(reason));
}

function outOfGas(gasLimit: bigint): ExecResult {
  return {
    executionGasUsed: gasLimit,
    returnValue: EMPTY,
    exceptionError: new EVMError(EVMError.errorMessages.OUT_OF_GAS),
  };
}
