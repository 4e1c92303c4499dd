/**
 * Revert reasons of NativeTransferAuth, as Error(string). Worded like USDC's FiatTokenV2 and
 * ECRecover so that tooling which classifies EIP-3009 failures by message (the x402 facilitator
 * does) reads them the same way.
 */
export const REVERT_REASONS = {
  nonPayable: "NativeTransferAuth: function is not payable",
  staticCall: "NativeTransferAuth: state change in a static call",
  delegateCall: "NativeTransferAuth: delegatecall or callcode not allowed",
  missingContext: "NativeTransferAuth: call context unavailable",
  operatorPool: "NativeTransferAuth: operator pool cannot authorize transfers",
  notYetValid: "NativeTransferAuth: authorization is not yet valid",
  expired: "NativeTransferAuth: authorization is expired",
  used: "NativeTransferAuth: authorization is used",
  invalidSignatureLength: "ECRecover: invalid signature length",
  invalidS: "ECRecover: invalid signature 's' value",
  invalidV: "ECRecover: invalid signature 'v' value",
  invalidSignature: "NativeTransferAuth: invalid signature",
  zeroRecipient: "NativeTransferAuth: transfer to the zero address",
  precompileRecipient: "NativeTransferAuth: transfer to the precompile",
  insufficientBalance: "NativeTransferAuth: transfer amount exceeds balance",
} as const;

export type RevertReason = (typeof REVERT_REASONS)[keyof typeof REVERT_REASONS];
