/** Types of program-bundles.mjs (plain JavaScript, so that dev/start.mjs runs it with node alone). */

export type BundleOptions = {
  /** The folder entries are relative to, whose node_modules the bundles use (the checkout). */
  root?: string;
  /** Where the builds go (default: dist under root). */
  outDir?: string;
};

export declare const REPO_ROOT: string;
export declare const PROGRAMS: readonly string[];
export declare function currentBundle(entry: string, options?: BundleOptions): string | undefined;
export declare function programArgs(entry: string, options?: BundleOptions): string[];
export declare function importProgram(entry: string, options?: BundleOptions): Promise<unknown>;
export declare function buildStalePrograms(
  options?: BundleOptions & { entries?: readonly string[]; onBuild?: (stale: string[]) => void },
): Promise<string[]>;
export declare function buildStaleProgramsSaying(
  say: (line: string) => void,
  options?: BundleOptions & { entries?: readonly string[] },
): Promise<string[]>;
