// The console's browsing pages: the paged lists (agents, actions, settlements), one agent, one
// action, one settlement. They read the console API through the `api` they are given (console.js
// keeps the tokens; nothing here sees them). A classic script: globalThis.ConsolePages.create(ctx).

(() => {
  const { el, table, definitions, short, time, pageLoader } = globalThis.ConsoleWidgets;
  const { href } = globalThis.ConsoleRouter;
  const $ = (id) => document.getElementById(id);
  const link = (section, id, text) => el("a", { href: href(section, id) }, text || short(id));

  /** What an action's refusal says: the code, the rule, what remained, the stored message. */
  function refusal(action) {
    if (!action.error_code && !(action.rule && ["held", "rejected", "expired"].includes(action.status)))
      return null;
    const parts = [action.error_code || action.status];
    if (action.rule) parts.push(`rule ${action.rule}`);
    if (action.remaining !== null) parts.push(`${action.remaining} remaining`);
    return `${parts.join(", ")}${action.error_message ? `: ${action.error_message}` : ""}`;
  }

  const actionRow = (action, withAgent) => [
    time(action.created_at),
    link("actions", action.action_id),
    ...(withAgent ? [link("agents", action.agent_id)] : []),
    action.kind,
    action.status,
    action.amount,
    short(action.to),
    short(action.tx_hash),
    refusal(action),
  ];
  const ACTION_HEADERS = [
    "created",
    "action",
    "kind",
    "state",
    "amount (units)",
    "to",
    "tx",
    "refusal or error",
  ];

  /** A paged list: the first page, then "older" appends the next one. */
  function pagedList({ api, path, target, more, render, empty, current }) {
    let rows = [];
    let cursor = null;
    const draw = () => $(target).replaceChildren(render(rows, empty));
    const separator = path.includes("?") ? "&" : "?";
    const load = pageLoader(
      (first) => api(first ? path : `${path}${separator}cursor=${encodeURIComponent(cursor)}`),
      (page, first) => {
        if (current && !current()) return;
        rows = first ? page.items : rows.concat(page.items);
        cursor = page.next_cursor;
        $(more).hidden = cursor === null;
        draw();
      },
    );
    return { first: () => load(true), next: () => load(false) };
  }

  function create(ctx) {
    const { api, guarded, say } = ctx;
    const lists = {};
    const list = (name, options) => {
      lists[name] = pagedList({ api, ...options });
      $(options.more).onclick = () => guarded(() => lists[name].next(), ctx.pageMessage(name));
      return lists[name];
    };

    list("agents", {
      path: "/identities?limit=50",
      target: "agent-list",
      more: "agent-list-more",
      empty: "no agent yet",
      render: (rows, empty) =>
        table(
          ["agent", "wallet", "origin", "state", "capabilities", "created", "last proof"],
          rows.map((identity) => [
            link("agents", identity.agent_id, identity.agent_id),
            identity.assigned_wallet,
            identity.origin,
            stateOf(identity),
            identity.capabilities.join(", "),
            time(identity.created_at),
            time(identity.last_verified_at),
          ]),
          empty,
          "agents",
        ),
    });
    list("actions", {
      path: "/actions?limit=50",
      target: "action-list",
      more: "action-list-more",
      empty: "no action yet",
      render: (rows, empty) =>
        table(
          ["created", "action", "agent", ...ACTION_HEADERS.slice(2)],
          rows.map((row) => actionRow(row, true)),
          empty,
          "actions",
        ),
    });
    list("settlements", {
      path: "/settlements?limit=50",
      target: "settlement-list",
      more: "settlement-list-more",
      empty: "no settlement yet",
      render: (rows, empty) =>
        table(
          ["created", "settlement", "state", "amount (units)", "payer", "agent", "pay to", "tx", "error"],
          rows.map((row) => [
            time(row.created_at),
            link("settlements", row.id),
            row.status,
            row.amount,
            short(row.payer),
            row.agent_id ? link("agents", row.agent_id) : null,
            short(row.pay_to),
            short(row.tx_hash),
            row.error_reason,
          ]),
          empty,
          "settlements",
        ),
    });

    let agentActions = null;
    let shownAgent = null;
    // The agent page asked for last: an answer for one asked before it (a slow chain read while
    // the operator moved on) is not drawn over it, nor are its actions.
    let agentAsked = 0;

    async function agent(id) {
      const asked = ++agentAsked;
      const data = await api(`/identities/${id}`);
      if (asked !== agentAsked) return;
      shownAgent = data.identity;
      $("agent-title").textContent = `Agent ${id}`;
      const identity = data.identity;
      const balance =
        "unavailable" in data.balance
          ? `unavailable: ${data.balance.unavailable}`
          : `${data.balance.units} units (block ${data.balance.block_number})`;
      const policy = data.policy;
      $("agent-detail").replaceChildren(
        definitions(el("dl", { class: "grid fields", id: "agent-identity" }), [
          ["wallet", identity.assigned_wallet],
          ["origin", identity.origin],
          ["capabilities", identity.capabilities.join(", ")],
          ["state", stateOf(identity)],
          ["created", time(identity.created_at)],
          ["last proof", time(identity.last_verified_at) || "never"],
          ["balance", balance],
          [
            "key batch",
            data.key.batch_id
              ? `${data.key.batch_id} (${data.key.batch_status}, ${data.key.drilled ? "drilled" : "not drilled: the funding gate holds it"})`
              : "none",
          ],
          [
            "policy",
            policy.document === null
              ? "none: the node's limits only"
              : `version ${policy.version}${policy.node_frozen ? ", node frozen" : ""}`,
          ],
        ]),
        el("h3", {}, "Budgets"),
        table(
          ["rule", "limit", "used", "remaining", "resets"],
          policy.budgets.map((budget) => [
            budget.rule,
            budget.limit,
            budget.used,
            budget.remaining,
            time(budget.resets_at),
          ]),
          "no budget: the agent has no policy of its own",
          "budgets",
        ),
        policy.document === null
          ? ""
          : el("pre", { class: "policy", tabindex: "0" }, JSON.stringify(policy.document, null, 2)),
        el("h3", {}, "Findings"),
        table(
          ["class", "code", "detail", "at"],
          data.findings.map((row) => [row.class, row.code, row.detail, time(row.at)]),
          "no finding",
          "findings",
        ),
      );
      showChange(identity);
      const refused = data.actions.items.find(
        (row) => row.kind !== "faucet" && refusal(row) && row.status !== "held",
      );
      $("agent-last-refusal").hidden = !refused;
      $("agent-last-refusal").textContent = refused
        ? `Last refused: ${refused.kind} of ${refused.amount ?? "—"} units at ${time(refused.created_at)} — ${refusal(refused)}`
        : "";
      agentActions = pagedList({
        api,
        path: `/actions?limit=25&agent_id=${id}`,
        target: "agent-actions",
        more: "agent-actions-more",
        empty: "no action yet",
        current: () => asked === agentAsked,
        render: (rows, empty) =>
          table(
            ACTION_HEADERS,
            rows.map((row) => actionRow(row, false)),
            empty,
            "the agent's actions",
          ),
      });
      await agentActions.first();
    }
    $("agent-actions-more").onclick = () => guarded(() => agentActions.next(), "agent-change-message");

    // The changes offered are the ones the state allows: disable or enable, and revoke until it is
    // done; a revoked agent is offered none. Read only, it says why nothing is offered.
    function showChange(identity) {
      const form = $("agent-change-form");
      form.hidden = false;
      const action = identity.enabled ? "disable" : "enable";
      form.dataset.action = action;
      form.dataset.agent = identity.agent_id;
      $("agent-change-submit").textContent = action === "disable" ? "Disable" : "Enable";
      $("agent-change-submit").hidden = identity.revoked;
      $("agent-revoke").hidden = identity.revoked;
      const blocked = identity.revoked
        ? "Revoked: this agent's token is refused for good; a revocation cannot be undone."
        : !ctx.canChange()
          ? ctx.readOnly
          : "";
      for (const id of ["agent-change-submit", "agent-revoke", "agent-change-reason"])
        $(id).disabled = blocked !== "";
      if (blocked) say(blocked, "note", "agent-change-message");
    }

    // Revoking is final, so the page asks first, naming the agent, with the reason to record.
    $("agent-revoke").addEventListener("click", () => {
      const agentId = $("agent-change-form").dataset.agent;
      if (!ctx.canChange()) return say(ctx.readOnly, "error", "agent-change-message");
      $("agent-revoke-text").textContent =
        `Agent ${agentId} will be refused at its next request, for good: a revocation cannot be undone, ` +
        "and no enable brings it back. Funds stay in its wallet; a transaction already submitted still completes.";
      $("agent-revoke-reason").value = $("agent-change-reason").value;
      $("agent-revoke-dialog").showModal();
      $("agent-revoke-reason").focus();
    });
    $("agent-revoke-cancel").addEventListener("click", () => $("agent-revoke-dialog").close());
    $("agent-revoke-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const agentId = $("agent-change-form").dataset.agent;
      const reason = $("agent-revoke-reason").value;
      $("agent-revoke-dialog").close();
      guarded(async () => {
        const result = await api("/registration/identity", {
          body: { agent_id: agentId, action: "revoke", reason },
        });
        $("agent-change-reason").value = "";
        await agent(agentId);
        say(
          result.changed
            ? "Revoked: its token is refused from its next request on, for good."
            : "Already revoked: nothing changed.",
          "ok",
          "agent-change-message",
        );
      }, "agent-change-message");
    });

    $("agent-change-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const form = $("agent-change-form");
      const { action, agent: agentId } = form.dataset;
      if (!ctx.canChange()) return say(ctx.readOnly, "error", "agent-change-message");
      guarded(async () => {
        const result = await api("/registration/identity", {
          body: { agent_id: agentId, action, reason: $("agent-change-reason").value },
        });
        $("agent-change-reason").value = "";
        await agent(agentId);
        say(
          result.changed
            ? `${action === "disable" ? "Disabled" : "Enabled"}: applies at the agent's next request.`
            : `Already ${result.after.enabled ? "enabled" : "disabled"}: nothing changed.`,
          "ok",
          "agent-change-message",
        );
      }, "agent-change-message");
    });

    async function action(id) {
      const row = await api(`/actions/${id}`);
      $("action-detail").replaceChildren(
        el("h3", {}, `Action ${row.action_id}`),
        definitions(el("dl", { class: "grid fields", id: "action-fields" }), [
          ["agent", link("agents", row.agent_id, row.agent_id)],
          ["kind", row.kind],
          ["state", row.status],
          ["idempotency key", row.idempotency_key],
          ["amount (units)", row.amount],
          ["to", row.to],
          ["transaction", row.tx_hash],
          ["refusal or error", refusal(row) || "none"],
          ["created", time(row.created_at)],
          ["updated", time(row.updated_at)],
        ]),
      );
    }

    async function settlement(id) {
      const row = await api(`/settlements/${id}`);
      $("settlement-detail").replaceChildren(
        el("h3", {}, `Settlement ${row.id}`),
        definitions(el("dl", { class: "grid fields", id: "settlement-fields" }), [
          ["state", row.status],
          ["amount (units)", row.amount],
          ["payer", row.payer],
          [
            "agent",
            row.agent_id ? link("agents", row.agent_id, row.agent_id) : "not one of this node's agents",
          ],
          ["pay to", row.pay_to],
          ["transaction", row.tx_hash],
          ["error", row.error_reason || "none"],
          ["resource", row.resource_url],
          ["created", time(row.created_at)],
          ["updated", time(row.updated_at)],
        ]),
      );
    }

    return {
      agent,
      action,
      settlement,
      clearDetails() {
        $("action-detail").replaceChildren();
        $("settlement-detail").replaceChildren();
      },
      list: (name) => lists[name].first(),
      shownAgent: () => shownAgent,
    };
  }

  function stateOf(identity) {
    if (identity.revoked) return "revoked";
    return identity.enabled ? "enabled" : `disabled (${identity.disabled_reason || "no reason"})`;
  }

  globalThis.ConsolePages = Object.freeze({ create, refusal, stateOf });
})();
