// The colour theme: light or dark, following the system's setting
// (prefers-color-scheme) unless the person chose one with the header's
// switch, which is remembered in localStorage. The colours themselves are
// CSS custom properties in styles.css (`:root` and `:root[data-theme="dark"]`);
// code that paints a canvas (the map, the charts) reads them with
// themeColor() and repaints on onThemeChange().
import { h } from "./dom";

export type Theme = "light" | "dark";
/** What the person chose: follow the system, or one theme. */
export type ThemeChoice = "system" | Theme;

/** The localStorage key of the choice. */
export const THEME_KEY = "netloom.theme";
/** The event on window after the theme changed; detail: the Theme. */
export const THEME_EVENT = "netloom:theme";
/** The switch's own event: the choice changed (maybe not the theme). */
const CHOICE_EVENT = "netloom:theme-choice";

const dark = window.matchMedia("(prefers-color-scheme: dark)");

function read(): ThemeChoice {
  try {
    const v = localStorage.getItem(THEME_KEY);
    return v === "light" || v === "dark" ? v : "system";
  } catch {
    return "system"; // storage blocked: follow the system
  }
}

let choice: ThemeChoice = read();

/** The person's choice. */
export function themeChoice(): ThemeChoice {
  return choice;
}

/** The theme in use now. */
export function currentTheme(): Theme {
  return choice === "system" ? (dark.matches ? "dark" : "light") : choice;
}

/** Sets <html data-theme> from the choice and the system; tells the
 * listeners when the theme changed. */
function applyTheme(): void {
  const t = currentTheme();
  const root = document.documentElement;
  if (root.dataset.theme === t) return;
  root.dataset.theme = t;
  window.dispatchEvent(new CustomEvent<Theme>(THEME_EVENT, { detail: t }));
}

/** Remembers the choice ("system" forgets it) and applies it. */
export function setThemeChoice(c: ThemeChoice): void {
  choice = c;
  try {
    if (c === "system") localStorage.removeItem(THEME_KEY);
    else localStorage.setItem(THEME_KEY, c);
  } catch {
    /* storage blocked: this page keeps the choice until it reloads */
  }
  applyTheme();
  window.dispatchEvent(new CustomEvent(CHOICE_EVENT));
}

/** Starts following the system's setting and applies the theme now (main.ts,
 * before anything is drawn). */
export function startTheme(): void {
  dark.addEventListener("change", applyTheme);
  // Another tab changed the choice.
  window.addEventListener("storage", (e) => {
    if (e.key !== THEME_KEY && e.key !== null) return;
    choice = read();
    applyTheme();
    window.dispatchEvent(new CustomEvent(CHOICE_EVENT));
  });
  applyTheme();
}

/** A theme colour by its custom property's name without the dashes
 * ("map-bg", "chart-axis", "ink"), as the browser resolves it now. */
export function themeColor(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(`--${name}`).trim();
}

/** Calls fn with the new theme each time it changes, until signal aborts. */
export function onThemeChange(fn: (t: Theme) => void, signal?: AbortSignal): void {
  window.addEventListener(THEME_EVENT, (e) => fn((e as CustomEvent<Theme>).detail), { signal });
}

/** The header's switch: Auto (the system's setting), Light, Dark; its
 * title says which the system's is now. */
export function themeSwitch(): HTMLSelectElement {
  const system = h("option", { value: "system" }, "");
  const sel = h(
    "select",
    { class: "theme-switch", "aria-label": "Colour theme" },
    system,
    h("option", { value: "light" }, "Light"),
    h("option", { value: "dark" }, "Dark"),
  );
  const paint = () => {
    system.textContent = "Auto";
    sel.title = `Colour theme: ${choice === "system" ? `as the system's (${dark.matches ? "dark" : "light"} now)` : choice}`;
    sel.value = themeChoice();
  };
  sel.addEventListener("change", () => setThemeChoice(sel.value as ThemeChoice));
  dark.addEventListener("change", paint);
  window.addEventListener(CHOICE_EVENT, paint);
  paint();
  return sel;
}
