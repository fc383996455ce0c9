// Requests to the server: the API key (asked for in a dialog when the server answers 401,
// kept for the tab in sessionStorage or, when asked, in localStorage), and the reading of
// a server-sent event stream.
import { $ } from "./dom.js";
import { KEYS } from "./storage.js";

export function apiKey() {
  return sessionStorage.getItem(KEYS.apiKey) || localStorage.getItem(KEYS.apiKey) || "";
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = apiKey();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

let keyWaiters = [];

// Shows the key dialog; resolves once the user gave a key.
function askForKey(reason) {
  $("key-reason").textContent = reason;
  const dialog = $("key-dialog");
  if (!dialog.open) {
    $("api-key").value = "";
    dialog.showModal();
    $("api-key").focus();
  }
  return new Promise((resolve) => keyWaiters.push(resolve));
}

/** Wires the key dialog and the Forget API key button. */
export function setUpKeyDialog() {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    if (!key) return;
    sessionStorage.removeItem(KEYS.apiKey);
    localStorage.removeItem(KEYS.apiKey);
    ($("remember-key").checked ? localStorage : sessionStorage).setItem(KEYS.apiKey, key);
    $("key-dialog").close();
    $("forget-key").hidden = false;
    const waiters = keyWaiters;
    keyWaiters = [];
    for (const w of waiters) w();
  });
  // The dialog cannot be dismissed without a key: the server refuses every request.
  $("key-dialog").addEventListener("cancel", (event) => event.preventDefault());
  $("forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEYS.apiKey);
    localStorage.removeItem(KEYS.apiKey);
    $("forget-key").hidden = true;
  });
  $("forget-key").hidden = !apiKey();
}

/** fetch, asking for the key again as long as the server answers 401. */
export async function api(path, init = {}) {
  for (;;) {
    const response = await fetch(path, { ...init, headers: headers() });
    if (response.status !== 401) return response;
    const message = await errorMessage(response);
    await askForKey(apiKey() ? `The server refused the key: ${message}` : "This server needs an API key.");
  }
}

export async function errorMessage(response) {
  try {
    const body = await response.json();
    return body?.error?.message || `HTTP ${response.status}`;
  } catch {
    return `HTTP ${response.status}`;
  }
}

/** Reads a text/event-stream body, calling `onEvent` with each `data:` JSON payload. */
export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let start = 0;
    for (let end; (end = buffer.indexOf("\n\n", start)) >= 0; start = end + 2) {
      for (const line of buffer.slice(start, end).split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        onEvent(JSON.parse(data));
      }
    }
    buffer = buffer.slice(start);
  }
}
