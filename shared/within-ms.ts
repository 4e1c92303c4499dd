/**
 * What `work` settles with, or undefined once `ms` have passed without it (its rejection, if it
 * comes first, is the caller's). The work goes on after the deadline: a caller that gives up on a
 * promise that may still reject catches it first.
 */
export async function withinMs<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
