// The console's passkeys page: an operator registers a passkey in this browser (the WebAuthn
// ceremony, through @simplewebauthn/browser, which the origin serves from its own node_modules),
// and every registered passkey is listed, pending until the policy authority's holder enrolls it
// with the line shown beside it. Registering gives a passkey no power; only that enrollment does.
// A lost or stolen one is revoked here, with a reason, for good.
// A classic script: globalThis.ConsolePasskeys.create(ctx).

(() => {
  const { el, table } = globalThis.ConsoleWidgets;
  const $ = (id) => document.getElementById(id);

  /** What the policy authority's holder runs to enroll a pending passkey (docs/operations.md#passkeys). */
  const enrollLine = (passkey) =>
    `npm run enclave-policy -- enroll-passkey ${passkey.key_id} --policy-key FILE`;

  /** Why the browser made no passkey or no signature, in words (a WebAuthnError or a DOMException). */
  function webauthnFailure(error) {
    const name = error?.code || error?.name || "Error";
    return `${name}: ${error?.message || "the browser gave no reason"}`;
  }

  function create(ctx) {
    const { api, guarded, say } = ctx;
    let passkeys = [];

    // The list, then each pending passkey's enroll line, whole (a phone wraps it, never cuts it).
    function render() {
      // A revoked passkey is never enrolled: it has no enroll line.
      const pending = passkeys.filter((passkey) => !passkey.enrolled && passkey.revoked_at === null);
      $("passkey-list").replaceChildren(
        table(
          ["operator", "key id", "fingerprint", "state", "rpId", "origin"],
          passkeys.map((passkey) => [
            passkey.operator,
            el("span", { class: "nowrap" }, passkey.key_id),
            passkey.fingerprint,
            passkey.revoked_at !== null
              ? `revoked ${passkey.revoked_at} (${passkey.revoked_reason})`
              : passkey.enrolled
                ? "enrolled"
                : "pending",
            passkey.rp_id,
            passkey.origin,
          ]),
          "no passkey registered yet",
          "registered passkeys",
        ),
        ...(pending.length === 0
          ? []
          : [
              el("h4", {}, "To enroll the pending ones"),
              el(
                "p",
                { class: "muted" },
                "The policy authority's holder runs each line, with the policy key's file for FILE, where the enclave's " +
                  "socket and the database are reachable, and compares the fingerprint it prints with the one above.",
              ),
              el(
                "ul",
                { class: "enroll-lines" },
                ...pending.map((passkey) =>
                  el(
                    "li",
                    {},
                    `${passkey.operator}, ${passkey.key_id}: `,
                    el("code", { class: "command", "data-enroll": passkey.key_id }, enrollLine(passkey)),
                  ),
                ),
              ),
            ]),
      );
    }

    // Signed in with a passkey, an operator registers under their own name only (the origin
    // refuses another): the name is filled in and fixed. Under the tokens, it is typed.
    function showOperator() {
      const operator = ctx.signedInOperator();
      const field = $("passkey-operator");
      if (operator) field.value = operator;
      else if (field.readOnly) field.value = "";
      field.readOnly = Boolean(operator);
    }

    // The passkeys that can still be revoked, by key id and operator.
    function renderRevocable() {
      const select = $("passkey-revoke-key");
      const chosen = select.value;
      const revocable = passkeys.filter((passkey) => passkey.revoked_at === null);
      select.replaceChildren(
        ...revocable.map((passkey) =>
          el("option", { value: passkey.key_id }, `${passkey.operator} (${passkey.key_id})`),
        ),
      );
      if (revocable.some((passkey) => passkey.key_id === chosen)) select.value = chosen;
    }

    async function show() {
      showOperator();
      passkeys = (await api("/passkeys")).passkeys;
      render();
      renderRevocable();
    }

    $("passkey-revoke-form").addEventListener("submit", (event) => {
      event.preventDefault();
      if (!ctx.canChange()) return say(ctx.readOnly, "error", "passkey-revoke-message");
      const keyId = $("passkey-revoke-key").value;
      if (!keyId) return say("No passkey left to revoke.", "error", "passkey-revoke-message");
      guarded(async () => {
        const passkey = await api(`/passkeys/${encodeURIComponent(keyId)}/revoke`, {
          body: { reason: $("passkey-revoke-reason").value },
        });
        $("passkey-revoke-reason").value = "";
        await show();
        say(
          `Revoked ${passkey.key_id} of ${passkey.operator}: it approves nothing and signs no one in from now on.`,
          "ok",
          "passkey-revoke-message",
        );
      }, "passkey-revoke-message");
    });

    $("passkey-form").addEventListener("submit", (event) => {
      event.preventDefault();
      if (!ctx.canChange()) return say(ctx.readOnly, "error", "passkey-message");
      const elsewhere = ctx.passkeyElsewhere();
      if (elsewhere) return say(elsewhere, "error", "passkey-message");
      const webauthn = globalThis.SimpleWebAuthnBrowser;
      if (!webauthn?.browserSupportsWebAuthn())
        return say(
          "This browser offers no WebAuthn: no passkey can be registered here.",
          "error",
          "passkey-message",
        );
      const operator = $("passkey-operator").value.trim();
      guarded(async () => {
        const { options } = await api("/passkeys/registration/options", { body: { operator } });
        let response;
        try {
          response = await webauthn.startRegistration({ optionsJSON: options });
        } catch (error) {
          return say(`No passkey was made: ${webauthnFailure(error)}`, "error", "passkey-message");
        }
        const passkey = await api("/passkeys/registration", { body: { operator, response } });
        if (!ctx.signedInOperator()) $("passkey-operator").value = "";
        await show();
        say(
          `Registered ${passkey.key_id} for ${passkey.operator}, fingerprint ${passkey.fingerprint}: pending. ` +
            "It approves nothing until the policy authority's holder enrolls it with the line shown below the list.",
          "ok",
          "passkey-message",
        );
      }, "passkey-message");
    });

    return { show };
  }

  globalThis.ConsolePasskeys = Object.freeze({ create, enrollLine, webauthnFailure });
})();
