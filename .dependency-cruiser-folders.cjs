// Folder-level import rule for origin/ (docs/development.md#where-code-lives), checked by
// `npm run lint` next to .dependency-cruiser.cjs: no import cycle between origin's folders, so
// each folder (a capability such as gateway/ or x402/, or a layer such as chain/ or db/) can be
// read with only the folders below it. Production code only: a test may import across folders.
// The files at origin/'s root are both the bottom (config, infrastructure, logger) and the top
// (compose, main, app) of the origin, so they are not a folder here; the file-level rule
// origin-import-cycle covers them.

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "origin-folder-cycle",
      comment: "No import cycle between the folders of origin/ (production code).",
      severity: "error",
      scope: "folder",
      from: { path: "^origin/[^/]+$" },
      to: { circular: true, path: "^origin/[^/]+$" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    includeOnly: { path: "^origin/" },
    exclude: { path: "(\\.test\\.ts$|^origin/testing/)" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".mts", ".js", ".mjs", ".cjs", ".json"],
    },
  },
};
