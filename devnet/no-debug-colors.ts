/**
 * Imported first by the devnet's entry (main.ts), before ethereumjs loads `debug`, which reads its
 * options from the environment once, when it loads. ethereumjs makes a `debug` logger for every
 * trie and cache it builds (a view of the head's state for each new block, a storage trie for each
 * account read), and each new logger asks the operating system whether stderr is a terminal unless
 * DEBUG_COLORS has answered already: a system call each, a few per block. An explicit setting stays.
 */
process.env.DEBUG_COLORS ??= "false";
