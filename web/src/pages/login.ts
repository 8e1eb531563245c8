// The login page (/login?next=PATH): user name and password, posted as
// JSON to /api/v1/auth/login; on success the browser goes on to the page
// that asked for the login (same-origin paths only, see safeNext). Shown
// whenever an API call answers 401 (api.ts sends the browser here).
import { ApiError, currentSession } from "../api";
import { login, safeNext } from "../auth";
import { h } from "../dom";
import type { PageContext } from "../router";
import { redirect } from "../router";

export function loginPage(home: () => string): (ctx: PageContext) => void {
  return (ctx) => {
    const { root, search } = ctx;
    // Where to go once signed in; home depends on the role, so it is
    // asked for after signing in.
    const target = () => safeNext(search.get("next"), home());
    if (currentSession()) {
      // Already signed in (or anonymous access is on): nothing to do here.
      redirect(target());
      return;
    }
    root.classList.add("login-page");
    const user = h("input", { id: "login-user", name: "user", type: "text", autocomplete: "username", autocapitalize: "none", spellcheck: "false", required: true, "aria-describedby": "login-error" });
    const password = h("input", { id: "login-password", name: "password", type: "password", autocomplete: "current-password", required: true, "aria-describedby": "login-error" });
    const error = h("p", { id: "login-error", class: "login-error", role: "alert" });
    const submit = h("button", { type: "submit", class: "btn primary" }, "Sign in");
    const form = h(
      "form",
      { class: "login-form", "aria-labelledby": "login-title", method: "post", novalidate: true },
      h("label", { for: "login-user" }, "User name"),
      user,
      h("label", { for: "login-password" }, "Password"),
      password,
      error,
      submit,
    );
    const wanted = safeNext(search.get("next"), "");
    root.append(
      h(
        "div",
        { class: "login-box" },
        h("h1", { id: "login-title" }, "Sign in to Netloom"),
        h("p", { class: "sub" }, wanted ? `Sign in to continue to ${wanted}.` : "Sign in with your Netloom account."),
        form,
      ),
    );

    const fail = (msg: string, field: HTMLInputElement) => {
      error.textContent = msg;
      for (const f of [user, password]) f.removeAttribute("aria-invalid");
      field.setAttribute("aria-invalid", "true");
      field.focus();
    };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!user.value.trim()) return fail("Enter your user name.", user);
      if (!password.value) return fail("Enter your password.", password);
      submit.disabled = true;
      error.textContent = "";
      submit.textContent = "Signing in…";
      login(user.value.trim(), password.value)
        .then(() => redirect(target()))
        .catch((err: unknown) => {
          if (ctx.signal.aborted) return;
          submit.disabled = false;
          submit.textContent = "Sign in";
          password.value = "";
          if (err instanceof ApiError && err.status === 401) fail("Wrong user name or password.", password);
          else if (err instanceof ApiError && err.status === 429) fail("Too many sign-in attempts. Wait a few seconds, then try again.", password);
          else fail(`Could not sign in: ${err instanceof Error ? err.message : String(err)}`, user);
        });
    });
    user.focus();
  };
}
