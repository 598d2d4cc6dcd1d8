// chatmem memory inspector: sign in and out, delete (a conversation, a fact), copy the prompt. Served from the binary
// (the pages allow no inline script). Every request is same-origin JSON, as the edge rules ask.
"use strict";

async function send(method, url, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  if (response.ok) return null;
  try {
    const error = (await response.json()).error;
    return `${error.message} (${error.code}, request ${error.request_id})`;
  } catch (_) {
    return `the server answered ${response.status}`;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const signin = document.getElementById("signin");
  if (signin) {
    signin.addEventListener("submit", async (event) => {
      event.preventDefault();
      const token = signin.querySelector("#token").value;
      const failed = await send("POST", "/ui/sign-in", { token });
      if (failed) document.getElementById("signin-error").textContent = failed;
      else location.reload();
    });
  }
  for (const button of document.querySelectorAll("[data-signout]")) {
    button.addEventListener("click", async () => {
      await send("POST", "/ui/sign-out", {});
      location.assign("/ui");
    });
  }
  for (const button of document.querySelectorAll("[data-delete]")) {
    button.addEventListener("click", async () => {
      if (!confirm(`Delete conversation ${button.dataset.id}? This cannot be undone.`)) return;
      const failed = await send("DELETE", button.dataset.delete);
      if (failed) alert(failed);
      else location.assign("/ui");
    });
  }
  for (const button of document.querySelectorAll("[data-delete-fact]")) {
    button.addEventListener("click", async () => {
      const question = `Delete fact #${button.dataset.fact}? Its history and the facts it superseded go with it; this cannot be undone.`;
      if (!confirm(question)) return;
      const failed = await send("DELETE", button.dataset.deleteFact);
      if (failed) alert(failed);
      else location.reload();
    });
  }
  for (const button of document.querySelectorAll("[data-copy]")) {
    button.addEventListener("click", async () => {
      const text = document.getElementById(button.dataset.copy).textContent;
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = "Copied";
      } catch (_) {
        button.textContent = "Select the text to copy it";
      }
    });
  }
});
