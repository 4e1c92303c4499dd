/** Hono context variables set by the origin's middleware. */
export type AppEnv = {
  Variables: {
    requestId: string;
  };
};
