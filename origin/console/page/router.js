// The console's hash router: each page has its own address (#/agents/<id>), so a link can be
// shared and the back button works, without colliding with the console API's own paths. A hash
// not starting with "#/" (the skip link's) is not a page. A classic script: globalThis.ConsoleRouter.

(() => {
  const PAGES = [
    "overview",
    "agents",
    "agent",
    "actions",
    "settlements",
    "approvals",
    "registration",
    "keys",
    "passkeys",
    "audit",
    "webhooks",
  ];
  // A page with an id shows one thing: an agent, an action, a settlement.
  const WITH_ID = { agents: "agent", actions: "actions", settlements: "settlements" };
  const ID = /^[0-9a-f-]{36}$/;

  /** { page, id } for a hash; the overview for an empty or unknown one. */
  function parse(hash) {
    const [name, id] = (hash || "").replace(/^#\//, "").split("/");
    if (name in WITH_ID && id !== undefined) {
      return ID.test(id)
        ? { page: WITH_ID[name], section: name, id }
        : { page: "overview", section: "overview" };
    }
    return PAGES.includes(name) && name !== "agent"
      ? { page: name, section: name }
      : { page: "overview", section: "overview" };
  }

  const href = (section, id) => (id ? `#/${section}/${id}` : `#/${section}`);
  const isPage = (hash) => hash === "" || hash.startsWith("#/");

  globalThis.ConsoleRouter = Object.freeze({ parse, href, isPage });
})();
