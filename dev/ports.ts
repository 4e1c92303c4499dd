/**
 * The local stack's ports, checked before anything starts: a port another program holds (an Anvil
 * or Hardhat node on 8545, another stack's origin) once let `npm start` take that program's answer
 * for its own part, print "ready" and a token, and die right after.
 */
import { createServer } from "node:net";

export type StackPort = { port: number; variable: string; part: string };

/** Resolves true when nothing listens on 127.0.0.1:`port` (we could bind it, and let it go). */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE" || error.code === "EACCES") resolve(false);
      else reject(error);
    });
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * Throws one error naming every busy port, its part and its variable, with a command that avoids
 * it. `given` is the stack's variables as the launcher was given them: the command repeats them,
 * so that, pasted as it is, it starts the same stack (its data folder, its other ports) on the
 * free ports, where one given on the command line once went missing and the command started
 * another stack on `.data`.
 */
export async function assertPortsFree(
  ports: StackPort[],
  given: Readonly<Record<string, string>> = {},
): Promise<void> {
  const busy: StackPort[] = [];
  for (const entry of ports) if (!(await portFree(entry.port))) busy.push(entry);
  if (busy.length === 0) return;
  const taken = new Set(ports.map((entry) => entry.port));
  const replaced = new Map<string, string>();
  for (const entry of busy) {
    let candidate = entry.port + 10_000 <= 65_535 ? entry.port + 10_000 : entry.port - 10_000;
    while (taken.has(candidate)) candidate += 1;
    taken.add(candidate);
    replaced.set(entry.variable, String(candidate));
  }
  const settings = new Map(Object.entries(given));
  for (const [variable, port] of replaced) settings.set(variable, port);
  const command = [...settings].map(([variable, value]) => `${variable}=${shellWord(value)}`);
  throw new Error(
    `${busy
      .map(
        (entry) => `port ${entry.port} (${entry.variable}, the ${entry.part}) is in use by another program`,
      )
      .join("; ")}. Stop that program, or choose other ports: ${command.join(" ")} npm start`,
  );
}

/** `value` as one word of a POSIX shell's command line: quoted when it holds anything but plain characters. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_./:,@%+-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}
