#!/usr/bin/env node
// The `agent-wallet` bin: the CLI is TypeScript, run through tsx's loader (a dependency).
import { register } from "tsx/esm/api";

register();
await import("./main.ts");
