// The operator console page. Plain JavaScript served as it is: no build step, no
// external asset, no inline script (the page's Content-Security-Policy allows only its own
// files: @simplewebauthn/browser's bundle, widgets.js, router.js, pages.js, charts.js,
// passkeys.js and approvals.js, loaded before this one).
// The tokens, or the session a passkey signed in to, live in the `tokens` object below and nowhere
// else: not in storage, cookies or the address. Everything shown is built with textContent, never
// parsed as HTML.

(() => {
  const API = document.querySelector('meta[name="console-api"]').getAttribute("content");
  const CONSOLE_ORIGIN = document.querySelector('meta[name="console-origin"]').getAttribute("content");

  // A passkey is bound to the console's origin (CONSOLE_ORIGIN). Opened at another address, the
  // page gets no passkey (at an IP address the browser makes none), or one the origin refuses as
  // a failed sign-in of this address (another port of the same name, through a tunnel): so the
  // page says where passkeys work instead, and sends nothing.
  function passkeyElsewhere() {
    if (location.origin === CONSOLE_ORIGIN) return null;
    let there;
    try {
      there = new URL(location.pathname + location.hash, CONSOLE_ORIGIN).href;
    } catch {
      return (
        `Passkeys work at no address of this console: its origin, ${CONSOLE_ORIGIN}, is no address a browser opens ` +
        "(set CONSOLE_ORIGIN and CONSOLE_RP_ID on the node). Nothing was sent."
      );
    }
    return (
      `Passkeys work only at the console's own address, ${there} (CONSOLE_ORIGIN), ` +
      `and this page was opened at ${location.origin}: open the console there to use one. Nothing was sent.`
    );
  }

  // `session` stands in for both tokens: an operator signed in with a passkey, named `operator`,
  // with the passkey `keyId`.
  const tokens = { admin: "", change: "", session: "", operator: "", keyId: "" };
  const signedIn = () => tokens.admin !== "" || tokens.session !== "";
  const canChange = () => tokens.change !== "" || tokens.session !== "";
  const $ = (id) => document.getElementById(id);

  const { el, table, definitions, short, time } = globalThis.ConsoleWidgets;
  const router = globalThis.ConsoleRouter;

  function show(target, node) {
    $(target).replaceChildren(node);
  }

  // A form's outcome is said beside that form (the page is long: a line at its top would be out of
  // sight); sign-in and the tokens' state are said at the top, where the sign-in form is.
  function say(text, kind, target) {
    const message = $(target || "message");
    message.textContent = text;
    message.className = `${target ? "form-message " : ""}${kind || ""}`;
    if (target) message.scrollIntoView({ block: "nearest" });
  }

  const CHANGE_FORMS = [
    ["settings-form", "settings-message"],
    ["identity-form", "identity-message"],
    ["webhook-add-form", "webhook-add-message"],
    ["webhook-change-form", "webhook-change-message"],
    ["passkey-form", "passkey-message"],
    ["passkey-revoke-form", "passkey-revoke-message"],
  ];
  const READ_ONLY =
    "Read only: the console was opened without the registration admin token, so nothing can be changed here. " +
    "Forget the tokens and open it again with both to make changes.";

  // Opened without the change token, the change forms say so and cannot be sent, instead of
  // letting the server refuse the change as a failed authentication.
  function showMode() {
    for (const [form, message] of CHANGE_FORMS) {
      for (const button of $(form).querySelectorAll("button[type=submit]")) button.disabled = !canChange();
      $(form).classList.toggle("read-only", !canChange());
      $(message).textContent = canChange() ? "" : READ_ONLY;
      $(message).className = canChange() ? "form-message" : "form-message note";
    }
  }

  class ApiError extends Error {
    constructor(method, status, body) {
      super(body?.error?.message || `HTTP ${status}`);
      this.method = method;
      this.status = status;
      this.body = body;
    }
  }

  async function api(path, options) {
    const headers = tokens.session
      ? { "x-console-session": tokens.session }
      : { "x-admin-api-token": tokens.admin };
    if (options?.body !== undefined) {
      headers["content-type"] = "application/json";
      if (!tokens.session) headers["x-registration-admin-token"] = tokens.change;
    }
    const method = options?.method ?? (options?.body === undefined ? "GET" : "POST");
    // The path's segments are encoded here; a query string comes encoded by its caller.
    const [route, query] = path.split("?");
    const response = await fetch(API + encodeURI(route) + (query === undefined ? "" : `?${query}`), {
      method,
      headers,
      body: options?.body === undefined ? undefined : JSON.stringify(options.body),
      cache: "no-store",
      credentials: "omit",
    });
    const body = response.status === 204 ? null : await response.json().catch(() => null);
    if (!response.ok) throw new ApiError(method, response.status, body);
    return body;
  }

  // Signing in with a passkey: the options and the assertion go without any credential (they are
  // how the page gets one); the session's token answered comes back once and is kept in `tokens`.
  async function signInWithPasskey() {
    const elsewhere = passkeyElsewhere();
    if (elsewhere) return say(elsewhere, "error");
    const webauthn = globalThis.SimpleWebAuthnBrowser;
    if (!webauthn?.browserSupportsWebAuthn())
      return say("This browser offers no WebAuthn: sign in with the tokens.", "error");
    const post = async (route, body) => {
      const response = await fetch(API + route, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        cache: "no-store",
        credentials: "omit",
      });
      const answer = await response.json().catch(() => null);
      if (!response.ok) throw new ApiError("SIGN-IN", response.status, answer);
      return answer;
    };
    const { options } = await post("/session/options", {});
    let response;
    try {
      response = await webauthn.startAuthentication({ optionsJSON: options });
    } catch (error) {
      const name = error?.code || error?.name || "Error";
      return say(
        `Not signed in: the passkey gave no signature (${name}: ${error?.message || "no reason"}).`,
        "error",
      );
    }
    const session = await post("/session", { response });
    tokens.admin = "";
    tokens.change = "";
    tokens.session = session.token;
    tokens.operator = session.operator;
    tokens.keyId = session.key_id;
    await refresh();
    $("login").hidden = true;
    $("console").hidden = false;
    showMode();
    showSignedIn();
    say(
      `Signed in as ${session.operator} with passkey ${session.key_id}: reading and changes, until ${time(session.expires_at)}.`,
      "ok",
    );
  }

  // The header names who is signed in, with a way out; under the shared tokens it names no one.
  function showSignedIn() {
    $("signed-in").hidden = !tokens.session;
    // A session ends by signing out (the origin ends it), not by the page forgetting it.
    $("forget").hidden = Boolean(tokens.session);
    $("signed-in-as").textContent = tokens.session ? `Signed in as ${tokens.operator}.` : "";
  }

  function explain(error) {
    if (!(error instanceof ApiError)) return `The console API did not answer: ${error.message}`;
    // A change is refused for its change token only: the read token was accepted a moment ago.
    if (error.status === 401 && error.method === "SIGN-IN") return `Not signed in: ${error.message}`;
    if (error.status === 401 && tokens.session)
      return "The session ended (signed out or expired): sign in again.";
    if (error.status === 401 && error.method === "POST")
      return "The registration admin token was refused: nothing changed. Forget the tokens and open the console again with the right one.";
    if (error.status === 401) return "Authentication failed: check the tokens.";
    if (error.status === 429)
      return `Too many failed attempts from this address; retry in ${error.body?.error?.retry_after ?? 60} s.`;
    return `${error.status} ${error.body?.error?.code || ""}: ${error.message}`;
  }

  function renderRegistration(data) {
    $("generated").textContent = `as of ${time(data.generated_at)}`;
    definitions($("counters"), [
      ["issued in total", data.counters.issued_total],
      [`issued today (${data.counters.utc_day} UTC)`, data.counters.issued_today],
      ["admission attempts this minute", data.counters.attempts_this_minute],
      ["admission attempts, last hour", data.counters.attempts_last_hour],
    ]);
    definitions($("overview-summary"), [
      ["issued in total", data.counters.issued_total],
      [`issued today (${data.counters.utc_day} UTC)`, data.counters.issued_today],
      ["free verified keys", data.key_stock.free],
      ["reserve", data.key_stock.reserve],
      ["registration", data.settings.paused ? "paused" : "open"],
    ]);
    definitions($("key-stock"), [
      ["free verified keys", data.key_stock.free],
      ["batches in flight", data.key_stock.in_flight_batches],
      ["keys in flight", data.key_stock.in_flight_keys],
      ["reserve", data.key_stock.reserve],
      ["issuable before the reserve", data.key_stock.issuable_before_reserve],
    ]);
    const names = Object.keys(data.setting_ranges);
    show(
      "settings",
      table(
        ["setting", "value", "range"],
        names.map((name) => {
          const range = data.setting_ranges[name];
          return [
            name,
            String(data.settings[name]),
            range.kind === "boolean" ? "true or false" : `0 to ${range.max}`,
          ];
        }),
      ),
    );
    const select = $("setting-name");
    if (select.options.length !== names.length) {
      select.replaceChildren(...names.map((name) => el("option", { value: name }, name)));
    }
    show(
      "identities",
      table(
        ["agent id", "wallet", "state", "created", "IP group", ""],
        data.identities.map((identity) => {
          const state = identity.revoked
            ? "revoked"
            : identity.enabled
              ? "enabled"
              : `disabled (${identity.disabled_reason || "no reason"})`;
          const action = identity.enabled ? "disable" : "enable";
          return [
            el("a", { href: router.href("agents", identity.agent_id) }, identity.agent_id),
            identity.assigned_wallet,
            state,
            time(identity.created_at),
            short(identity.ip_group),
            // A revoked agent is offered no change, as on its own page: an enable would set a flag
            // while its token stays refused for good.
            identity.revoked
              ? ""
              : el(
                  "button",
                  {
                    type: "button",
                    "data-agent": identity.agent_id,
                    "data-action": action,
                    // Read only: nothing to prepare a change for.
                    ...(canChange() ? {} : { disabled: "" }),
                    onclick: () => {
                      $("identity-agent").value = identity.agent_id;
                      $("identity-action").value = action;
                      $("identity-reason").focus();
                    },
                  },
                  action === "disable" ? "Disable…" : "Enable…",
                ),
          ];
        }),
        "no public identity yet",
      ),
    );
    show(
      "ip-groups",
      table(
        ["IP group (HMAC)", "issued", "today", "attempts this minute", "attempts last hour", "last issued"],
        data.ip_groups.map((group) => [
          short(group.ip_group),
          group.issued_total,
          group.issued_today,
          group.attempts_this_minute,
          group.attempts_last_hour,
          time(group.last_issued_at),
        ]),
      ),
    );
    $("buckets-node").textContent = `Node started ${time(data.local_buckets.node_started_at)}.`;
    show(
      "buckets",
      table(
        ["tier", "key", "count in 60 s"],
        data.local_buckets.buckets.map((bucket) => [bucket.tier, short(bucket.key), bucket.count]),
        "no bucket active in the last 60 s",
      ),
    );
  }

  function renderOperations(data) {
    show(
      "findings",
      el(
        "div",
        {},
        table(
          ["class", "count", "latest"],
          data.identity_findings.by_class.map((row) => [row.class, row.count, time(row.last_at)]),
          "no finding recorded",
        ),
        data.identity_findings.recent.length === 0
          ? ""
          : table(
              ["agent id", "class", "code", "at"],
              data.identity_findings.recent.map((row) => [row.agent_id, row.class, row.code, time(row.at)]),
            ),
      ),
    );
    const drills = data.key_batches.drills;
    show(
      "batches",
      el(
        "div",
        {},
        table(
          ["state", "batches", "keys"],
          data.key_batches.by_state.map((row) => [row.state, row.count, row.keys]),
        ),
        // The funding gate holds the wallets of an undrilled batch: name them, with the command.
        el(
          "p",
          {},
          `restore drill: ${drills.drilled} backed-up batch(es) drilled, ${drills.undrilled_count} not drilled` +
            (drills.undrilled_count > 0 ? " (npm run restore-drill -- --pending)" : ""),
        ),
        drills.undrilled.length === 0
          ? ""
          : table(
              ["batch (not drilled)", "keys", "backed up"],
              drills.undrilled.map((row) => [row.batch_id, row.keys, time(row.created_at)]),
            ),
      ),
    );
    for (const target of ["actions", "overview-actions"]) {
      show(
        target,
        table(
          ["kind", "state", "count"],
          data.actions.by_state.map((row) => [row.kind, row.state, row.count]),
          "no action yet",
        ),
      );
    }
    show(
      "recent-actions",
      table(
        ["action", "agent", "kind", "status", "amount", "to", "tx", "error", "updated"],
        data.actions.recent.map((row) => [
          el("a", { href: router.href("actions", row.action_id) }, short(row.action_id)),
          el("a", { href: router.href("agents", row.agent_id) }, short(row.agent_id)),
          row.kind,
          row.status,
          row.amount,
          short(row.to),
          short(row.tx_hash),
          row.error_code,
          time(row.updated_at),
        ]),
      ),
    );
    show(
      "settlements",
      table(
        ["state", "count"],
        data.x402_settlements.by_state.map((row) => [row.state, row.count]),
      ),
    );
    show(
      "exceptions",
      table(
        ["id", "wallet", "ceiling (units)", "reason", "approved", "expires"],
        data.funding_exceptions.active.map((row) => [
          short(row.id),
          row.wallet,
          row.ceiling_units,
          row.reason,
          time(row.approved_at),
          time(row.expires_at),
        ]),
      ),
    );
  }

  // Who made a change: the operator and passkey a session or an approval names; else the channel's
  // shared credential (the console's admin token, the operator tools' own).
  const madeBy = (row) =>
    row.operator
      ? `${row.operator} (${row.passkey_key_id})`
      : row.source === "console"
        ? "admin token"
        : row.source === "cli"
          ? "operator tools"
          : "not recorded";

  function renderAudit(data) {
    $("audit-note").textContent = data.note;
    show(
      "audit",
      table(
        ["at", "what", "subject", "change", "before", "after", "reason", "via", "by"],
        data.changes.map((row) => [
          time(row.at),
          row.kind,
          row.subject,
          row.change,
          row.before,
          row.after,
          row.reason,
          row.source,
          madeBy(row),
        ]),
        "no change recorded",
      ),
    );
  }

  function renderWebhooks(data) {
    const chosen = new Set(
      [...$("webhook-events").querySelectorAll("input:checked")].map((input) => input.value),
    );
    $("webhook-events").replaceChildren(
      el("legend", {}, "Event types"),
      ...data.event_types.map((type) =>
        el(
          "label",
          { class: "check" },
          el("input", {
            type: "checkbox",
            name: "webhook-event-type",
            value: type,
            ...(chosen.has(type) ? { checked: "" } : {}),
          }),
          type,
        ),
      ),
    );
    const prepare = (endpointId, action, eventId) => {
      $("webhook-endpoint").value = endpointId;
      $("webhook-action").value = action;
      $("webhook-event").value = eventId || "";
      $("webhook-change-reason").focus();
    };
    const button = (label, attributes, onclick) =>
      el(
        "button",
        { type: "button", ...attributes, ...(canChange() ? {} : { disabled: "" }), onclick },
        label,
      );
    if (data.endpoints.length === 0) {
      show("webhooks", el("p", { class: "muted" }, "no endpoint"));
      return;
    }
    show(
      "webhooks",
      el(
        "div",
        {},
        ...data.endpoints.map((endpoint) =>
          el(
            "div",
            { class: "webhook-endpoint", "data-endpoint": endpoint.id },
            table(
              ["endpoint", "url", "events", "state", "pending", "added", "", "", ""],
              [
                [
                  endpoint.id,
                  endpoint.url,
                  endpoint.events.join(", "),
                  endpoint.enabled ? "enabled" : `disabled (${endpoint.disabled_reason || "no reason"})`,
                  endpoint.at_bound
                    ? `${endpoint.pending} (at the bound of ${data.max_pending}: queueing paused)`
                    : String(endpoint.pending),
                  time(endpoint.created_at),
                  button("Replay all…", { "data-action": "replay-all" }, () =>
                    prepare(endpoint.id, "replay"),
                  ),
                  button("Rotate secret…", { "data-action": "rotate-secret" }, () =>
                    prepare(endpoint.id, "rotate-secret"),
                  ),
                  button("Remove…", { "data-action": "remove" }, () => prepare(endpoint.id, "remove")),
                ],
              ],
            ),
            table(
              [
                "webhook-id",
                "event",
                "type",
                "status",
                "attempts",
                "last status",
                "last error",
                "next attempt",
                "delivered",
                "",
              ],
              endpoint.deliveries.map((delivery) => [
                delivery.webhook_id,
                delivery.event_id,
                delivery.event_type,
                delivery.status,
                delivery.attempts,
                delivery.last_http_status,
                delivery.last_error,
                time(delivery.next_attempt_at),
                time(delivery.delivered_at),
                button("Replay…", { "data-action": "replay", "data-event": delivery.event_id }, () =>
                  prepare(endpoint.id, "replay", delivery.event_id),
                ),
              ]),
              "no delivery yet",
            ),
          ),
        ),
      ),
    );
  }

  // The node's counters, settings, audit and webhooks, which the overview, registration, keys,
  // audit and webhooks pages show.
  const NODE_PAGES = ["overview", "registration", "keys", "audit", "webhooks"];
  async function readNode() {
    const [registration, operations, audit, webhooks] = await Promise.all([
      api("/registration"),
      api("/operations"),
      api("/audit"),
      api("/webhooks"),
    ]);
    renderRegistration(registration);
    renderOperations(operations);
    renderAudit(audit);
    renderWebhooks(webhooks);
  }

  async function refresh() {
    await readNode();
    await showRoute({ nodeRead: true });
  }

  // ─── Pages and search ───────────────────────────────────────────────────────────────────────
  const pages = globalThis.ConsolePages.create({
    api,
    guarded: (work, target) => guarded(work, target),
    say: (text, kind, target) => say(text, kind, target),
    canChange,
    readOnly: READ_ONLY,
    pageMessage: () => "message",
  });
  // The passkeys and approvals pages get the same, and who is signed in: no token either.
  const pageContext = {
    api,
    guarded: (work, target) => guarded(work, target),
    say: (text, kind, target) => say(text, kind, target),
    canChange,
    readOnly: READ_ONLY,
    signedInOperator: () => tokens.operator,
    signedInKeyId: () => tokens.keyId,
    passkeyElsewhere,
  };
  const passkeys = globalThis.ConsolePasskeys.create(pageContext);
  const approvals = globalThis.ConsoleApprovals.create(pageContext);

  // The page the address names: its section shown, the others hidden, its data read; the nav
  // marks it as the current page. Signed out, the address is kept for after the sign-in.
  // A page opened from the nav reads its data again, so it shows a change made on another page
  // since (a disable in the audit, say); `nodeRead` when refresh() has just read it.
  async function showRoute({ nodeRead = false } = {}) {
    if (!signedIn()) return;
    const route = router.parse(location.hash);
    if (!nodeRead && NODE_PAGES.includes(route.page)) await readNode();
    for (const section of document.querySelectorAll("main section[data-page]")) {
      section.hidden = section.dataset.page !== route.page;
    }
    for (const a of $("nav").querySelectorAll("a")) {
      if (a.dataset.page === route.section) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    if (route.page === "agent") await pages.agent(route.id);
    if (route.page === "actions") {
      pages.clearDetails();
      if (route.id) await pages.action(route.id);
      await pages.list("actions");
    }
    if (route.page === "settlements") {
      pages.clearDetails();
      if (route.id) await pages.settlement(route.id);
      await pages.list("settlements");
    }
    if (route.page === "agents") await pages.list("agents");
    if (route.page === "passkeys") await passkeys.show();
    if (route.page === "approvals") await approvals.show();
    if (route.page === "overview") await renderCharts();
  }

  // The charts (charts.js, when the page loads it) read their own route; without it, nothing is asked.
  async function renderCharts() {
    const charts = globalThis.ConsoleCharts;
    if (!charts?.render) return;
    charts.render($("overview-charts"), await api("/overview/charts"));
  }

  window.addEventListener("hashchange", () => {
    if (!router.isPage(location.hash)) return;
    guarded(async () => {
      await showRoute();
      $("content").focus();
    });
  });

  // The skip link moves the focus without changing the address (which names the page).
  $("skip-link").addEventListener("click", (event) => {
    event.preventDefault();
    $("content").focus();
  });

  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const query = $("search").value.trim();
    $("search-results").replaceChildren();
    guarded(async () => {
      const found = await api(`/search?q=${encodeURIComponent(query)}`);
      const to = (match) => router.href(match.kind === "agent" ? "agents" : `${match.kind}s`, match.id);
      if (found.matches.length === 1) {
        say(`Found: ${found.matches[0].label}.`, "ok", "search-message");
        location.hash = to(found.matches[0]);
        return;
      }
      if (found.matches.length === 0) {
        say(
          `Nothing found for ${query} (read as ${found.read_as.replace("_", " ")}).`,
          "error",
          "search-message",
        );
        return;
      }
      say(`${found.matches.length} matches:`, "ok", "search-message");
      $("search-results").replaceChildren(
        el(
          "ul",
          {},
          ...found.matches.map((match) =>
            el("li", {}, el("a", { href: to(match) }, `${match.label}: ${match.id}`)),
          ),
        ),
      );
    }, "search-message");
  });

  function forget(text, kind) {
    tokens.admin = "";
    tokens.change = "";
    tokens.session = "";
    tokens.operator = "";
    tokens.keyId = "";
    showSignedIn();
    $("webhook-secret").textContent = "";
    $("webhook-secret").hidden = true;
    $("webhook-rotated-secret").textContent = "";
    $("webhook-rotated-secret").hidden = true;
    $("console").hidden = true;
    $("login").hidden = false;
    say(text, kind);
  }

  async function guarded(work, target) {
    try {
      await work();
    } catch (error) {
      // A read refused for its token means the tokens are wrong: ask for them again. A change
      // refused for its token leaves the console open (the read token is right).
      if (error instanceof ApiError && error.status === 401 && (error.method === "GET" || tokens.session))
        forget(explain(error), "error");
      else say(explain(error), "error", target);
    }
  }

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    tokens.admin = $("admin-token").value;
    tokens.change = $("change-token").value;
    tokens.session = "";
    tokens.operator = "";
    tokens.keyId = "";
    // The fields are cleared at once: the values now live only in `tokens`.
    $("admin-token").value = "";
    $("change-token").value = "";
    guarded(async () => {
      await refresh();
      $("login").hidden = true;
      $("console").hidden = false;
      showMode();
      say(tokens.change ? "Signed in: reading and changes." : "Signed in: reading only.", "ok");
    });
  });

  $("sign-in-passkey").addEventListener("click", () => guarded(signInWithPasskey));
  $("sign-out").addEventListener("click", () =>
    guarded(async () => {
      await api("/session", { method: "DELETE" });
      forget("Signed out: the session is ended.", "ok");
    }),
  );
  // Every session of the signed-in operator, in any browser (a lost laptop, a forgotten tab).
  $("sign-out-everywhere").addEventListener("click", () =>
    guarded(async () => {
      const { ended } = await api("/session/end-all", { method: "POST" });
      forget(`Signed out everywhere: ${ended} session${ended === 1 ? "" : "s"} ended.`, "ok");
    }),
  );
  $("refresh").addEventListener("click", () => guarded(refresh));
  $("forget").addEventListener("click", () => forget("Tokens forgotten.", ""));

  $("settings-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("setting-name").value;
    const text = $("setting-value").value.trim();
    // Numbers and booleans as JSON; anything else is sent as typed and refused by the server.
    const value =
      text === "true" ? true : text === "false" ? false : /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : text;
    if (!canChange()) return say(READ_ONLY, "error", "settings-message");
    guarded(async () => {
      const result = await api("/registration/settings", {
        body: { changes: { [name]: value }, reason: $("setting-reason").value },
      });
      $("setting-value").value = "";
      $("setting-reason").value = "";
      await refresh();
      say(
        result.changed.length === 0
          ? `${name} already had that value: nothing changed.`
          : result.changed
              .map((change) => `${change.setting}: ${change.before} → ${change.after}`)
              .join("; "),
        "ok",
        "settings-message",
      );
    }, "settings-message");
  });

  $("webhook-add-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (!canChange()) return say(READ_ONLY, "error", "webhook-add-message");
    const events = [...$("webhook-events").querySelectorAll("input:checked")].map((input) => input.value);
    if (events.length === 0) return say("Choose at least one event type.", "error", "webhook-add-message");
    $("webhook-secret").hidden = true;
    $("webhook-secret").textContent = "";
    guarded(async () => {
      const added = await api("/webhooks", {
        body: { url: $("webhook-url").value.trim(), events, reason: $("webhook-add-reason").value },
      });
      $("webhook-url").value = "";
      $("webhook-add-reason").value = "";
      for (const input of $("webhook-events").querySelectorAll("input:checked")) input.checked = false;
      await refresh();
      // The secret is shown here once: the API never answers it again, and the page keeps it
      // only in this element until the next add or the tokens are forgotten.
      $("webhook-secret").textContent = added.secret;
      $("webhook-secret").hidden = false;
      say(
        `Endpoint ${added.id} added. Its secret, below, is shown once: keep it where the receiver verifies v1 signatures.`,
        "ok",
        "webhook-add-message",
      );
    }, "webhook-add-message");
  });

  $("webhook-change-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (!canChange()) return say(READ_ONLY, "error", "webhook-change-message");
    const endpointId = $("webhook-endpoint").value.trim();
    const action = $("webhook-action").value;
    const eventId = $("webhook-event").value.trim();
    const reason = $("webhook-change-reason").value;
    $("webhook-rotated-secret").hidden = true;
    $("webhook-rotated-secret").textContent = "";
    guarded(async () => {
      let text;
      if (action === "remove") {
        await api(`/webhooks/${endpointId}/remove`, { body: { reason } });
        text = `${endpointId} removed, with its deliveries.`;
      } else if (action === "rotate-secret") {
        const overlap = $("webhook-overlap").value.trim();
        const rotated = await api(`/webhooks/${endpointId}/rotate-secret`, {
          body: overlap === "" ? { reason } : { overlap_hours: Number(overlap), reason },
        });
        // Shown here once, as an added endpoint's: the API never answers it again, and the page
        // keeps it only in this element until the next change or the tokens are forgotten.
        $("webhook-rotated-secret").textContent = rotated.secret;
        $("webhook-rotated-secret").hidden = false;
        text = `${endpointId}: a new secret, below, shown once; the one it replaces signs beside it until ${rotated.previous_secret_until}.`;
      } else {
        const result = await api(`/webhooks/${endpointId}/replay`, {
          body: eventId === "" ? { reason } : { event_id: eventId, reason },
        });
        text = `${endpointId}: ${result.queued} deliveries queued${eventId === "" ? "" : ` (event ${eventId})`}.`;
      }
      $("webhook-change-reason").value = "";
      $("webhook-event").value = "";
      await refresh();
      say(text, "ok", "webhook-change-message");
    }, "webhook-change-message");
  });

  $("identity-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const agentId = $("identity-agent").value.trim();
    const action = $("identity-action").value;
    if (!canChange()) return say(READ_ONLY, "error", "identity-message");
    guarded(async () => {
      const result = await api("/registration/identity", {
        body: { agent_id: agentId, action, reason: $("identity-reason").value },
      });
      $("identity-reason").value = "";
      await refresh();
      const said = result.changed
        ? `${agentId}: ${result.before.enabled ? "enabled" : "disabled"} → ${result.after.enabled ? "enabled" : "disabled"}`
        : `${agentId} was already ${result.after.enabled ? "enabled" : "disabled"}: nothing changed`;
      // The agent id may be typed in: an enabled flag does not bring a revoked agent back.
      say(
        result.revoked
          ? `${said}, but it stays revoked: its token is refused for good.`
          : `${said}${result.changed ? "" : "."}`,
        "ok",
        "identity-message",
      );
    }, "identity-message");
  });
})();
