// leap-ref's chat page: a conversation streamed from /v1/chat/completions (server-sent
// events), kept in localStorage. Model text is only ever put in the page as text nodes
// (textContent), never as HTML. With a model that reads images or audio, a user message
// may carry attachments: PNG or JPEG images (sent as image_url data URLs) and WAV files
// (input_audio parts).
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const KEYS = {
    conversations: "leap-ref.conversations",
    current: "leap-ref.current",
    settings: "leap-ref.settings",
    apiKey: "leap-ref.api-key",
  };
  // Fields sent with every request when set; the others are the server's defaults.
  const NUMBER_FIELDS = [...document.querySelectorAll("[data-field]")];

  const state = {
    conversations: [],
    currentId: null,
    // The running generation: { controller, conversation, message }.
    running: null,
    model: null,
    savePending: false,
    // Attachments of the next message: { kind: "image" | "audio", name, size, data (a data URL) }.
    pending: [],
  };

  // Attachments: what the page reads, and what localStorage keeps. A data URL longer than
  // KEEP_CHARS is kept in memory for this tab only: after a reload the message shows the
  // file's name and the attachment is no longer sent.
  const MAX_ATTACHMENT_BYTES = 16 * 1024 * 1024;
  const KEEP_CHARS = 1_000_000;
  const IMAGE_TYPES = ["image/png", "image/jpeg"];
  const AUDIO_TYPES = ["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"];
  const SAFE_DATA_URL = /^data:(image\/(png|jpeg)|audio\/(wav|x-wav|wave|vnd\.wave)|application\/octet-stream);base64,[A-Za-z0-9+/=]*$/;

  // MARK: Storage

  function read(storage, key, fallback) {
    try {
      const text = storage.getItem(key);
      return text === null ? fallback : JSON.parse(text);
    } catch {
      return fallback;
    }
  }

  function write(storage, key, value) {
    try {
      storage.setItem(key, JSON.stringify(value));
      return true;
    } catch {
      return false;
    }
  }

  // The conversations as stored: attachments' data URLs up to KEEP_CHARS (none when
  // `keepMedia` is false), longer ones by name only.
  function storable(conversations, keepMedia) {
    return conversations.map((c) => ({
      ...c,
      messages: c.messages.map((m) =>
        Array.isArray(m.attachments)
          ? {
              ...m,
              attachments: m.attachments.map((a) =>
                keepMedia && a.data && a.data.length <= KEEP_CHARS ? a : { ...a, data: null },
              ),
            }
          : m,
      ),
    }));
  }

  function saveConversations() {
    state.savePending = false;
    // On a full storage, keep the attachments by name only, then drop the oldest
    // conversations until it fits.
    for (;;) {
      if (write(localStorage, KEYS.conversations, storable(state.conversations, true))) break;
      if (write(localStorage, KEYS.conversations, storable(state.conversations, false))) {
        setStatus("The browser's storage is full: attachments are kept by name only.");
        break;
      }
      if (state.conversations.length <= 1) {
        setStatus("Could not save the conversation: the browser's storage is full.");
        return;
      }
      state.conversations.shift();
    }
    write(localStorage, KEYS.current, state.currentId);
  }

  // While tokens stream in, at most one save every quarter second.
  function saveSoon() {
    if (state.savePending) return;
    state.savePending = true;
    setTimeout(saveConversations, 250);
  }

  function loadConversations() {
    const list = read(localStorage, KEYS.conversations, []);
    state.conversations = Array.isArray(list)
      ? list.filter((c) => c && typeof c.id === "string" && Array.isArray(c.messages))
      : [];
    const current = read(localStorage, KEYS.current, null);
    state.currentId = state.conversations.some((c) => c.id === current) ? current : null;
    // A generation cut short by a reload is no longer running.
    for (const c of state.conversations) {
      for (const m of c.messages) if (m.state === "streaming") m.state = "stopped";
    }
  }

  function currentConversation() {
    return state.conversations.find((c) => c.id === state.currentId) || null;
  }

  function newConversation() {
    const c = { id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`, title: "New chat", messages: [] };
    state.conversations.push(c);
    state.currentId = c.id;
    return c;
  }

  // MARK: API key

  function apiKey() {
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

  // fetch, asking for the key again as long as the server answers 401.
  async function api(path, init = {}) {
    for (;;) {
      const response = await fetch(path, { ...init, headers: headers() });
      if (response.status !== 401) return response;
      const message = await errorMessage(response);
      await askForKey(apiKey() ? `The server refused the key: ${message}` : "This server needs an API key.");
    }
  }

  async function errorMessage(response) {
    try {
      const body = await response.json();
      return body?.error?.message || `HTTP ${response.status}`;
    } catch {
      return `HTTP ${response.status}`;
    }
  }

  // MARK: The model

  async function loadModel() {
    for (;;) {
      try {
        const response = await api("/v1/models");
        if (response.status === 503) {
          $("model-name").textContent = "loading the model…";
          await new Promise((r) => setTimeout(r, 1000));
          continue;
        }
        if (!response.ok) {
          $("model-name").textContent = `error: ${await errorMessage(response)}`;
          return;
        }
        const body = await response.json();
        state.model = (body.data && body.data[0]) || null;
        $("model-name").textContent = state.model ? state.model.id : "no model";
        updateAttach();
        return;
      } catch (error) {
        $("model-name").textContent = "cannot reach the server";
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }

  // What the model reads besides text, as /v1/models says it (`input_modalities`, or
  // OpenRouter's `architecture.input_modalities`).
  function modelInputs(model) {
    const inputs = model?.input_modalities || model?.architecture?.input_modalities || [];
    return { image: inputs.includes("image"), audio: inputs.includes("audio") };
  }

  // The attach button, for models that read images or audio only, and the file types the
  // file chooser offers.
  function updateAttach() {
    const takes = modelInputs(state.model);
    const kinds = [...(takes.image ? ["a PNG or JPEG image"] : []), ...(takes.audio ? ["a WAV file"] : [])];
    $("attach").hidden = kinds.length === 0;
    $("attach").title = `Attach ${kinds.join(" or ")}`;
    $("attach-file").accept = [...(takes.image ? IMAGE_TYPES : []), ...(takes.audio ? [...AUDIO_TYPES, ".wav"] : [])].join(",");
    document.querySelector('label[for="attach-file"]').textContent = `Attach ${kinds.join(" or ") || "a file"}`;
  }

  // MARK: Attachments

  // "image", "audio", or null, from the file's type or, without one, its name.
  function attachmentKind(file) {
    const type = (file.type || "").toLowerCase();
    const name = file.name.toLowerCase();
    if (IMAGE_TYPES.includes(type) || (!type && /\.(png|jpe?g)$/.test(name))) return "image";
    if (AUDIO_TYPES.includes(type) || (!type && name.endsWith(".wav"))) return "audio";
    return null;
  }

  function readDataURL(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result));
      reader.onerror = () => reject(reader.error || new Error("the file cannot be read"));
      reader.readAsDataURL(file);
    });
  }

  async function addFiles(files) {
    const takes = modelInputs(state.model);
    for (const file of files) {
      const kind = attachmentKind(file);
      if (!kind) {
        setStatus(`${file.name}: not attached; send a PNG or JPEG image or a WAV file.`);
        continue;
      }
      if (!takes[kind]) {
        setStatus(`${file.name}: not attached; this model does not read ${kind === "image" ? "images" : "audio"}.`);
        continue;
      }
      if (file.size > MAX_ATTACHMENT_BYTES) {
        setStatus(`${file.name}: not attached; it is larger than ${MAX_ATTACHMENT_BYTES / 1048576} MiB.`);
        continue;
      }
      try {
        const data = await readDataURL(file);
        state.pending.push({ kind, name: file.name, size: file.size, data });
        setStatus(`Attached ${file.name}.`);
      } catch (error) {
        setStatus(`${file.name}: ${error.message || error}`);
      }
    }
    renderPending();
  }

  // The attachments of the next message, each with a button that removes it.
  function renderPending() {
    const list = $("attachments");
    list.hidden = state.pending.length === 0;
    list.replaceChildren(
      ...state.pending.map((a, i) => {
        const li = document.createElement("li");
        li.append(attachmentView(a));
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "delete";
        remove.textContent = "×";
        remove.setAttribute("aria-label", `Remove ${a.name}`);
        remove.addEventListener("click", () => {
          state.pending.splice(i, 1);
          renderPending();
          setStatus(`Removed ${a.name}.`);
          $("message").focus();
        });
        li.append(remove);
        return li;
      }),
    );
  }

  // An attachment as shown: an image's thumbnail or a WAV file's player, with its name; by
  // name only when its data was not kept (or is not a data URL this page wrote).
  function attachmentView(a) {
    const figure = document.createElement("figure");
    figure.className = `attachment ${a.kind === "audio" ? "audio" : "image"}`;
    const name = String(a.name || (a.kind === "audio" ? "audio" : "image"));
    const safe = typeof a.data === "string" && SAFE_DATA_URL.test(a.data);
    if (safe && a.kind === "image") {
      const img = document.createElement("img");
      img.className = "thumb";
      img.src = a.data;
      img.alt = name;
      figure.append(img);
    } else if (safe && a.kind === "audio") {
      const audio = document.createElement("audio");
      audio.controls = true;
      audio.preload = "none";
      audio.src = a.data;
      audio.setAttribute("aria-label", name);
      figure.append(audio);
    }
    const caption = document.createElement("figcaption");
    caption.textContent = safe ? name : `${name} (not kept in this browser)`;
    figure.append(caption);
    return figure;
  }

  // A stored message's content as the API takes it: text, or its kept attachments (images
  // as image_url data URLs, WAV files as input_audio) followed by its text.
  function apiContent(m) {
    const kept = (Array.isArray(m.attachments) ? m.attachments : []).filter(
      (a) => typeof a.data === "string" && SAFE_DATA_URL.test(a.data),
    );
    if (!kept.length) return m.content;
    const parts = kept.map((a) =>
      a.kind === "audio"
        ? { type: "input_audio", input_audio: { data: a.data.slice(a.data.indexOf(",") + 1), format: "wav" } }
        : { type: "image_url", image_url: { url: a.data } },
    );
    if (m.content) parts.push({ type: "text", text: m.content });
    return parts;
  }

  // MARK: Settings

  function settings() {
    return read(localStorage, KEYS.settings, {}) || {};
  }

  function loadSettings() {
    const s = settings();
    for (const el of document.querySelectorAll("[data-setting]")) {
      const v = s[el.dataset.setting];
      el.value = v === undefined || v === null ? "" : String(v);
    }
  }

  function storeSettings() {
    const s = {};
    for (const el of document.querySelectorAll("[data-setting]")) {
      if (el.value.trim() !== "") s[el.dataset.setting] = el.value;
    }
    write(localStorage, KEYS.settings, s);
  }

  // The request fields from the settings, or throws an Error naming the bad field.
  function requestFields() {
    const fields = {};
    for (const el of NUMBER_FIELDS) {
      const text = el.value.trim();
      if (text === "") continue;
      const value = Number(text);
      const label = document.querySelector(`label[for="${el.id}"]`).textContent;
      if (!Number.isFinite(value) || ("integer" in el.dataset && !Number.isInteger(value))) {
        throw new Error(`${label}: "${text}" is not ${"integer" in el.dataset ? "an integer" : "a number"}`);
      }
      fields[el.dataset.field] = value;
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
      fields.dry_sequence_breakers = list;
    }
    const schema = $("json-schema").value.trim();
    if (schema) {
      let parsed;
      try {
        parsed = JSON.parse(schema);
      } catch (error) {
        throw new Error(`JSON Schema: not valid JSON (${error.message})`);
      }
      fields.response_format = { type: "json_schema", json_schema: { name: "reply", schema: parsed, strict: true } };
    }
    return fields;
  }

  // MARK: Rendering

  function setStatus(text) {
    $("status").textContent = text;
  }

  // Text with fenced code blocks (```lang ... ```) as <pre><code> and `inline code`; every
  // piece of model text goes in as a text node.
  function renderText(container, text) {
    container.replaceChildren();
    const fence = /```([^\n`]*)\n?([\s\S]*?)(?:```|$)/g;
    let last = 0;
    for (let m; (m = fence.exec(text)) !== null; ) {
      if (m.index === fence.lastIndex) fence.lastIndex++;
      // The line breaks around a block are the block's own.
      renderInline(container, text.slice(last, m.index).replace(/\n$/, ""));
      const pre = document.createElement("pre");
      pre.className = "code";
      if (m[1].trim()) {
        const lang = document.createElement("span");
        lang.className = "lang";
        lang.textContent = m[1].trim();
        pre.append(lang);
      }
      const code = document.createElement("code");
      code.textContent = m[2].replace(/\n$/, "");
      pre.append(code);
      container.append(pre);
      last = fence.lastIndex;
      if (text[last] === "\n") last++;
      if (last >= text.length) break;
    }
    renderInline(container, text.slice(last));
  }

  function renderInline(container, text) {
    if (!text) return;
    const parts = text.split(/`([^`\n]+)`/);
    parts.forEach((part, i) => {
      if (i % 2 === 1) {
        const code = document.createElement("code");
        code.className = "inline";
        code.textContent = part;
        container.append(code);
      } else if (part) {
        container.append(document.createTextNode(part));
      }
    });
  }

  function statsText(m) {
    if (m.state === "stopped") return "stopped";
    if (m.state === "error" || !m.usage) return "";
    const u = m.usage;
    const t = m.timings || {};
    const parts = [`${u.completion_tokens} tokens`];
    if (typeof t.predicted_per_second === "number") parts.push(`${t.predicted_per_second.toFixed(1)} tokens/s`);
    const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
    parts.push(`prompt ${u.prompt_tokens} tokens, ${cached} from the cache`);
    if (m.finish_reason === "length") parts.push("cut at max tokens");
    return parts.join(" · ");
  }

  function renderMessage(m) {
    const el = document.createElement("article");
    el.className = `message ${m.role}`;
    el.dataset.role = m.role;
    el.dataset.state = m.state || "done";
    const role = document.createElement("div");
    role.className = "role";
    role.textContent = m.role === "user" ? "You" : "Assistant";
    el.append(role);
    if (m.reasoning) {
      const thinking = document.createElement("div");
      thinking.className = "thinking";
      thinking.textContent = m.reasoning;
      el.append(thinking);
    }
    if (Array.isArray(m.attachments) && m.attachments.length) {
      const box = document.createElement("div");
      box.className = "attachments";
      box.append(...m.attachments.map(attachmentView));
      el.append(box);
    }
    const body = document.createElement("div");
    body.className = "body";
    renderText(body, m.content || "");
    el.append(body);
    if (m.error) {
      const error = document.createElement("p");
      error.className = "error";
      error.setAttribute("role", "alert");
      error.textContent = m.error;
      el.append(error);
    }
    const stats = statsText(m);
    if (stats) {
      const s = document.createElement("div");
      s.className = "stats";
      s.textContent = stats;
      el.append(s);
    }
    return el;
  }

  function renderMessages() {
    const c = currentConversation();
    const box = $("messages");
    box.replaceChildren(...(c ? c.messages.map(renderMessage) : []));
    box.scrollTop = box.scrollHeight;
    updateButtons();
  }

  // Re-renders the last message only (while it streams).
  function renderLast() {
    const c = currentConversation();
    const box = $("messages");
    if (!c || !c.messages.length) return;
    const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    const fresh = renderMessage(c.messages[c.messages.length - 1]);
    if (box.lastElementChild && box.childElementCount === c.messages.length) {
      box.lastElementChild.replaceWith(fresh);
    } else {
      box.append(fresh);
    }
    if (nearBottom) box.scrollTop = box.scrollHeight;
  }

  function renderConversationList() {
    const list = $("conversation-list");
    list.replaceChildren(
      ...[...state.conversations].reverse().map((c) => {
        const li = document.createElement("li");
        const open = document.createElement("button");
        open.type = "button";
        open.className = "open";
        open.textContent = c.title || "New chat";
        open.setAttribute("aria-current", c.id === state.currentId ? "true" : "false");
        open.addEventListener("click", () => switchTo(c.id));
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "delete";
        remove.textContent = "×";
        remove.setAttribute("aria-label", `Delete “${c.title || "New chat"}”`);
        remove.addEventListener("click", () => removeConversation(c.id));
        li.append(open, remove);
        return li;
      }),
    );
  }

  function updateButtons() {
    const running = state.running !== null;
    const c = currentConversation();
    // Screen readers read the reply once it is complete, not every token.
    $("messages").setAttribute("aria-busy", String(running));
    $("stop").hidden = !running;
    $("send").disabled = running;
    const last = c && c.messages[c.messages.length - 1];
    $("regenerate").disabled = running || !last || !c.messages.some((m) => m.role === "user");
  }

  // MARK: Conversations

  async function switchTo(id) {
    stop();
    state.currentId = id;
    saveConversations();
    renderConversationList();
    renderMessages();
    setStatus("");
  }

  function removeConversation(id) {
    if (state.running && state.running.conversation.id === id) stop();
    state.conversations = state.conversations.filter((c) => c.id !== id);
    if (state.currentId === id) state.currentId = null;
    saveConversations();
    renderConversationList();
    renderMessages();
  }

  // MARK: Generation

  async function send(text) {
    let c = currentConversation() || newConversation();
    const attachments = state.pending;
    state.pending = [];
    renderPending();
    if (!c.messages.length) c.title = (text || attachments.map((a) => a.name).join(", ")).replace(/\s+/g, " ").slice(0, 48);
    c.messages.push(attachments.length ? { role: "user", content: text, attachments } : { role: "user", content: text });
    renderConversationList();
    renderMessages();
    await generate(c);
  }

  async function regenerate() {
    const c = currentConversation();
    if (!c || state.running) return;
    while (c.messages.length && c.messages[c.messages.length - 1].role === "assistant") c.messages.pop();
    if (!c.messages.length) return;
    renderMessages();
    await generate(c);
  }

  function stop() {
    if (!state.running) return;
    const { controller, message } = state.running;
    message.state = "stopped";
    state.running = null;
    controller.abort();
    saveConversations();
    renderLast();
    updateButtons();
    setStatus("Stopped.");
  }

  async function generate(c) {
    let fields;
    try {
      fields = requestFields();
      $("settings-error").textContent = "";
    } catch (error) {
      $("settings-error").textContent = error.message;
      setStatus(`Not sent: ${error.message}`);
      openSettings(true);
      return;
    }
    const system = $("system-prompt").value.trim();
    const messages = [
      ...(system ? [{ role: "system", content: system }] : []),
      ...c.messages.map((m) => ({ role: m.role, content: m.role === "user" ? apiContent(m) : m.content })),
    ];
    const message = { role: "assistant", content: "", state: "streaming" };
    c.messages.push(message);
    const controller = new AbortController();
    state.running = { controller, conversation: c, message };
    renderMessages();
    setStatus("Generating…");
    saveConversations();
    const body = {
      model: state.model ? state.model.id : "default",
      messages,
      stream: true,
      stream_options: { include_usage: true },
      ...fields,
    };
    try {
      const response = await api("/v1/chat/completions", {
        method: "POST",
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(await errorMessage(response));
      await readEvents(response, (event) => {
        if (event.error) throw new Error(event.error.message || "the server failed");
        if (event.usage) {
          message.usage = event.usage;
          message.timings = event.timings;
        }
        for (const choice of event.choices || []) {
          const delta = choice.delta || {};
          if (delta.content) message.content += delta.content;
          if (delta.reasoning_content) message.reasoning = (message.reasoning || "") + delta.reasoning_content;
          if (choice.finish_reason) message.finish_reason = choice.finish_reason;
        }
        if (state.running && state.running.message === message) {
          renderLast();
          saveSoon();
        }
      });
      if (message.state === "streaming") {
        message.state = "done";
        setStatus("");
      }
    } catch (error) {
      if (message.state === "streaming") {
        message.state = "error";
        message.error = error.name === "AbortError" ? "stopped" : String(error.message || error);
        setStatus("");
      }
    } finally {
      if (state.running && state.running.message === message) state.running = null;
      saveConversations();
      if (currentConversation() === c) renderMessages();
      updateButtons();
    }
  }

  // Reads a text/event-stream body, calling `onEvent` with each `data:` JSON payload.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of block.split("\n")) {
          if (!line.startsWith("data:")) continue;
          const data = line.slice(5).trim();
          if (data === "[DONE]") return;
          onEvent(JSON.parse(data));
        }
      }
    }
  }

  // MARK: Panels

  const app = document.querySelector(".app");

  function openHistory(open) {
    $("history").hidden = !open;
    $("toggle-history").setAttribute("aria-expanded", String(open));
    app.classList.toggle("no-history", !open);
  }

  function openSettings(open) {
    $("settings").hidden = !open;
    $("toggle-settings").setAttribute("aria-expanded", String(open));
    app.classList.toggle("no-settings", !open);
  }

  // MARK: Events

  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("message").value.trim();
    if ((!text && !state.pending.length) || state.running) return;
    $("message").value = "";
    send(text);
  });

  $("attach").addEventListener("click", () => $("attach-file").click());
  $("attach-file").addEventListener("change", async (event) => {
    const files = [...event.target.files];
    event.target.value = "";
    await addFiles(files);
    $("message").focus();
  });
  // Files dropped on the message box are attached too.
  $("composer").addEventListener("dragover", (event) => {
    if (!$("attach").hidden) event.preventDefault();
  });
  $("composer").addEventListener("drop", (event) => {
    if ($("attach").hidden || !event.dataTransfer?.files?.length) return;
    event.preventDefault();
    addFiles([...event.dataTransfer.files]);
  });

  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });

  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && state.running && !$("key-dialog").open) {
      event.preventDefault();
      stop();
    }
  });

  $("stop").addEventListener("click", stop);
  $("regenerate").addEventListener("click", regenerate);
  $("new-chat").addEventListener("click", () => {
    stop();
    // An empty conversation is reused rather than listed twice.
    if (currentConversation()?.messages.length !== 0) newConversation();
    saveConversations();
    renderConversationList();
    renderMessages();
    setStatus("");
    $("message").focus();
  });
  $("toggle-history").addEventListener("click", () => openHistory($("history").hidden));
  $("toggle-settings").addEventListener("click", () => openSettings($("settings").hidden));
  $("close-settings").addEventListener("click", () => openSettings(false));
  $("reset-settings").addEventListener("click", () => {
    write(localStorage, KEYS.settings, {});
    loadSettings();
    $("settings-error").textContent = "";
  });
  for (const el of document.querySelectorAll("[data-setting]")) el.addEventListener("change", storeSettings);

  // Another tab changed the conversations: show them (unless this tab is generating).
  window.addEventListener("storage", (event) => {
    if (event.key !== KEYS.conversations || state.running) return;
    loadConversations();
    renderConversationList();
    renderMessages();
  });

  // MARK: Start

  loadConversations();
  loadSettings();
  $("forget-key").hidden = !apiKey();
  const wide = window.matchMedia("(min-width: 60rem)").matches;
  openHistory(wide);
  openSettings(false);
  renderConversationList();
  renderMessages();
  loadModel();
})();
