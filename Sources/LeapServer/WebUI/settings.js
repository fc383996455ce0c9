// The settings panel: its fields are kept in localStorage (leap-ref.settings) and sent with
// every request when set; empty fields are the server's defaults. A checkbox is kept as
// true when ticked; a list (select) as its value, its first option when none is kept.
import { $ } from "./dom.js";
import { KEYS, read, write } from "./storage.js";

const fields = () => document.querySelectorAll("[data-setting]");

export function loadSettings() {
  const s = read(localStorage, KEYS.settings, {}) || {};
  for (const el of fields()) {
    const v = s[el.dataset.setting];
    if (el.type === "checkbox") el.checked = v === true;
    else if (el.tagName === "SELECT") {
      el.value = typeof v === "string" && [...el.options].some((o) => o.value === v) ? v : el.options[0]?.value ?? "";
    } else el.value = v === undefined || v === null ? "" : String(v);
  }
}

export function storeSettings() {
  const s = {};
  for (const el of fields()) {
    if (el.type === "checkbox") {
      if (el.checked) s[el.dataset.setting] = true;
    } else if (el.value.trim() !== "") s[el.dataset.setting] = el.value;
  }
  write(localStorage, KEYS.settings, s);
}

export function resetSettings() {
  write(localStorage, KEYS.settings, {});
  loadSettings();
}

/** The request fields from the settings, or throws an Error naming the bad field. */
export function requestFields() {
  const result = {};
  for (const el of document.querySelectorAll("[data-field]")) {
    const text = el.value.trim();
    if (text === "") continue;
    const value = Number(text);
    const label = document.querySelector(`label[for="${el.id}"]`).textContent;
    if (!Number.isFinite(value) || ("integer" in el.dataset && !Number.isInteger(value))) {
      throw new Error(`${label}: "${text}" is not ${"integer" in el.dataset ? "an integer" : "a number"}`);
    }
    result[el.dataset.field] = value;
  }
  const breakers = $("dry-breakers").value.trim();
  if (breakers) {
    let list;
    try {
      list = JSON.parse(breakers);
    } catch {
      throw new Error('Sequence breakers: write a JSON array of strings, such as ["\\n", ":"]');
    }
    if (!Array.isArray(list) || !list.every((s) => typeof s === "string")) {
      throw new Error("Sequence breakers: write a JSON array of strings");
    }
    result.dry_sequence_breakers = list;
  }
  const schema = $("json-schema").value.trim();
  if (schema) {
    let parsed;
    try {
      parsed = JSON.parse(schema);
    } catch (error) {
      throw new Error(`JSON Schema: not valid JSON (${error.message})`);
    }
    result.response_format = { type: "json_schema", json_schema: { name: "reply", schema: parsed, strict: true } };
  }
  return result;
}
