import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "postgresql",
  schema: "./origin/db/schema.ts",
  out: "./migrations",
});
