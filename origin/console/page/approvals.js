// The console's approvals page: the actions the agents' policies hold, each with exactly what an
// approval of it signs (the shown document the origin builds and the enclave rebuilds: payee,
// amount, until when the approval lasts) and a button that has an enrolled passkey sign it in this
// browser (startAuthentication) and relays the assertion. The enclave verifies it; the origin
// cannot make one. A classic script: globalThis.ConsoleApprovals.create(ctx).

(() => {
  const { el, definitions, time, pageLoader } = globalThis.ConsoleWidgets;
  const { href } = globalThis.ConsoleRouter;
  const { webauthnFailure } = globalThis.ConsolePasskeys;
  const $ = (id) => document.getElementById(id);
  const PAGE = 20;
  const NO_PASSKEY =
    "No enrolled passkey: register one on the Passkeys page, and have the policy authority's holder enroll it. " +
    "Until then nothing can be approved here.";

  const fromUnix = (seconds) => time(new Date(seconds * 1000).toISOString());
  /** The parts of the shown document that name the action: a fresh one must name the same. */
  const SAME = ["op", "kind", "ref", "to", "value_units", "key_ref"];

  function create(ctx) {
    const { api, guarded, say } = ctx;
    let rows = [];
    let cursor = null;
    let enrolled = [];
    // The passkey the operator chose in the list, and who was signed in when they chose it.
    let picked = { keyId: "", by: "" };

    const signer = () => $("approval-passkey").value;

    // Listed newest first, the enrolled passkeys may begin with another operator's, which this
    // device does not hold: the one offered is the one chosen in this sign-in, else the signed-in
    // operator's own, else the newest.
    function showSigners() {
      const select = $("approval-passkey");
      const own = ctx.signedInKeyId();
      const chosen = picked.by === own ? picked.keyId : "";
      select.replaceChildren(
        ...enrolled.map((passkey) =>
          el("option", { value: passkey.key_id }, `${passkey.operator} (${passkey.key_id})`),
        ),
      );
      const offered = [chosen, own].find((keyId) => enrolled.some((passkey) => passkey.key_id === keyId));
      if (offered) select.value = offered;
      select.disabled = enrolled.length === 0 || !ctx.canChange();
      const blocked = !ctx.canChange() ? ctx.readOnly : enrolled.length === 0 ? NO_PASSKEY : "";
      $("approvals-message").textContent = blocked;
      $("approvals-message").className = blocked ? "form-message note" : "form-message";
    }

    async function show() {
      enrolled = (await api("/passkeys")).passkeys.filter(
        (passkey) => passkey.enrolled && passkey.revoked_at === null,
      );
      showSigners();
      await load(true);
    }

    const load = pageLoader(
      (first) =>
        api(`/actions?status=held&limit=${PAGE}${first ? "" : `&cursor=${encodeURIComponent(cursor)}`}`),
      async (page, first) => {
        rows = first ? page.items : rows.concat(page.items);
        cursor = page.next_cursor;
        $("held-list-more").hidden = cursor === null;
        await draw();
      },
    );

    async function draw() {
      if (rows.length === 0) {
        $("held-list").replaceChildren(el("p", { class: "muted" }, "No action is held."));
        return;
      }
      const cards = rows.map(heldCard);
      $("held-list").replaceChildren(...cards.map((card) => card.node));
      // What each approval signs is asked of the origin (and through it the enclave) only when a
      // passkey can sign it: read only, or without a passkey, the action's own row is shown.
      if (ctx.canChange() && signer()) await Promise.all(cards.map((card) => card.prepare()));
    }

    /** One held action: its row, what its approval signs, the button, and the feedback beside it. */
    function heldCard(row) {
      const id = row.action_id;
      const messageId = `approve-message-${id}`;
      const target = { change: "approve_held", action_id: id };
      const signs = el("dl", { class: "grid fields", id: `signs-${id}` });
      const button = el(
        "button",
        { type: "button", id: `approve-${id}`, disabled: "" },
        "Approve with passkey",
      );
      const message = el("p", {
        id: messageId,
        class: "form-message",
        role: "status",
        "aria-live": "polite",
      });
      let prepared = null;

      definitions(signs, [
        ["payee", row.to],
        ["amount (units)", row.amount],
        ["approval lasts until", "asked when a passkey can sign"],
      ]);
      if (!ctx.canChange()) {
        message.textContent = ctx.readOnly;
        message.className = "form-message note";
      }

      const showSigned = (options) =>
        definitions(signs, [
          ["payee", options.shown.to],
          ["amount (units)", options.shown.value_units],
          [
            "approval lasts until",
            `${fromUnix(options.shown.approval_expires_at)} (unix ${options.shown.approval_expires_at})`,
          ],
          [options.shown.kind === "x402" ? "authorization nonce" : "action", options.shown.ref],
          ["agent key", options.shown.key_ref],
          ["signed by", `${options.operator}'s passkey ${options.key_id}`],
          ["signature void after", fromUnix(options.expires_at)],
          ["challenge", options.challenge],
        ]);

      const ask = () => api("/approvals/options", { body: { target, key_id: signer() } });

      async function prepare() {
        await guarded(async () => {
          prepared = await ask();
          showSigned(prepared);
          button.disabled = false;
        }, messageId);
      }

      async function approve() {
        const elsewhere = ctx.passkeyElsewhere();
        if (elsewhere) return say(elsewhere, "error", messageId);
        const webauthn = globalThis.SimpleWebAuthnBrowser;
        if (!webauthn?.browserSupportsWebAuthn())
          return say("This browser offers no WebAuthn: nothing can be signed here.", "error", messageId);
        // A fresh challenge (its counter only grows), checked to name the same action as shown.
        const fresh = await ask();
        const same = prepared && SAME.every((field) => fresh.shown[field] === prepared.shown[field]);
        prepared = fresh;
        showSigned(fresh);
        if (!same)
          return say(
            "What this approval signs changed since it was shown: read it again, then approve.",
            "error",
            messageId,
          );
        let response;
        try {
          response = await webauthn.startAuthentication({ optionsJSON: fresh.options });
        } catch (error) {
          return say(
            `The passkey did not sign: ${webauthnFailure(error)}. Nothing was approved.`,
            "error",
            messageId,
          );
        }
        let result;
        try {
          result = await api("/approvals", {
            body: {
              target,
              key_id: fresh.key_id,
              counter: fresh.counter,
              expires_at: fresh.expires_at,
              approval_expires_at: fresh.shown.approval_expires_at,
              response,
            },
          });
        } catch (error) {
          // The enclave's refusal, by its name (passkey_challenge, operator_replay, …).
          const detail = error?.body?.error?.detail;
          if (error?.status === 403 && detail)
            return say(`Refused by the enclave: ${detail}. Nothing was approved.`, "error", messageId);
          if (error?.status === 409) return say(`Not approved: ${error.message}.`, "error", messageId);
          throw error;
        }
        button.remove();
        node.classList.add("approved");
        say(
          `Approved by ${result.operator} with passkey ${result.key_id}: the enclave signs it once. ` +
            "It leaves this list at the next refresh.",
          "ok",
          messageId,
        );
      }

      button.addEventListener("click", () => {
        button.disabled = true;
        guarded(approve, messageId).finally(() => {
          if (button.isConnected) button.disabled = false;
        });
      });

      const node = el(
        "article",
        { class: "held-action", "data-action": id, "aria-labelledby": `held-title-${id}` },
        el("h3", { id: `held-title-${id}` }, `Held ${row.kind} of ${row.amount ?? "—"} units`),
        definitions(el("dl", { class: "grid fields" }), [
          ["action", el("a", { href: href("actions", id) }, id)],
          ["agent", el("a", { href: href("agents", row.agent_id) }, row.agent_id)],
          ["held by", row.rule],
          ["requested", time(row.created_at)],
        ]),
        el("h4", {}, "What your passkey signs"),
        signs,
        el("div", { class: "approve-row" }, button, message),
      );
      return { node, prepare };
    }

    $("approval-passkey").addEventListener("change", () => {
      picked = { keyId: signer(), by: ctx.signedInKeyId() };
      guarded(draw, "approvals-message");
    });
    $("approval-signer-form").addEventListener("submit", (event) => event.preventDefault());
    $("held-list-more").addEventListener("click", () => guarded(() => load(false), "approvals-message"));

    return { show };
  }

  globalThis.ConsoleApprovals = Object.freeze({ create });
})();
