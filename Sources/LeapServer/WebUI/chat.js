// leap-ref's chat page: a conversation streamed from /v1/chat/completions (server-sent
// events), kept in localStorage. Model text is only ever put in the page as text nodes
// (textContent), never as HTML. With a model that reads images or audio, a user message
// may carry attachments; with a model that speaks, replies may be spoken (played as they
// stream, then kept with a player).
//
// The page's modules (ES modules, no build step; the server names each import with the
// imported file's hash, so an upgrade never mixes old and new files):
//   chat.js         this one: the conversations, sending and streaming, the controls
//   api.js          requests, the API key dialog, server-sent events
//   storage.js      localStorage: one key per conversation, an index, attachments apart
//   messages.js     messages as shown, and a streaming reply shown token by token
//   markup.js       model text as text nodes, code blocks and inline code
//   attachments.js  images and WAV files of user messages
//   settings.js     the settings panel and the request fields it makes
//   speech.js       spoken replies: played as they stream, and their WAV
//   dom.js          small DOM helpers
import { api, errorMessage, readEvents, setUpKeyDialog } from "./api.js";
import {
  apiContent, attachmentKind, attachmentView, AUDIO_TYPES, IMAGE_TYPES, MAX_ATTACHMENT_BYTES, modelInputs, readDataURL,
} from "./attachments.js";
import { $, element, setStatus } from "./dom.js";
import { LiveMessage, renderMessage, ScrollFollower } from "./messages.js";
import { loadSettings, requestFields, resetSettings, storeSettings } from "./settings.js";
import { modelSpeaks, SpeechPlayer, speechFields, SpokenReply } from "./speech.js";
import { ConversationStore } from "./storage.js";

const store = new ConversationStore();
const state = {
  // The running generation: { controller, conversation, message, live, spoken }, `spoken`
  // the reply's audio as it streams (a SpokenReply) when it is spoken, else null.
  running: null,
  model: null,
  // Attachments of the next message: { kind: "image" | "audio", name, size, data (a data URL) }.
  pending: [],
};
const scroller = new ScrollFollower($("messages"));
// Plays spoken replies; Stop (or Esc) also silences a reply still playing after it ended.
const player = new SpeechPlayer();
player.onIdle = () => updateButtons();

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
      // The speech settings, for a model that speaks.
      $("speech-settings").hidden = !modelSpeaks(state.model);
      return;
    } catch (error) {
      $("model-name").textContent = "cannot reach the server";
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
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

// MARK: Attachments of the next message

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
      const remove = element("button", "delete", "×");
      remove.type = "button";
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

// MARK: Rendering

function renderMessages() {
  const c = store.current();
  $("messages").replaceChildren(...(c ? c.messages.map(renderMessage) : []));
  scroller.toEnd();
  updateButtons();
}

function renderConversationList() {
  $("conversation-list").replaceChildren(
    ...[...store.conversations].reverse().map((c) => {
      const li = document.createElement("li");
      const open = element("button", "open", c.title || "New chat");
      open.type = "button";
      open.setAttribute("aria-current", c.id === store.currentId ? "true" : "false");
      open.addEventListener("click", () => switchTo(c.id));
      const remove = element("button", "delete", "×");
      remove.type = "button";
      remove.setAttribute("aria-label", `Delete “${c.title || "New chat"}”`);
      remove.addEventListener("click", () => removeConversation(c.id));
      li.append(open, remove);
      return li;
    }),
  );
}

function updateButtons() {
  const running = state.running !== null;
  const c = store.current();
  // Screen readers read the reply once it is complete, not every token.
  $("messages").setAttribute("aria-busy", String(running));
  $("stop").hidden = !running && !player.playing;
  $("send").disabled = running;
  const last = c && c.messages[c.messages.length - 1];
  $("regenerate").disabled = running || !last || !c.messages.some((m) => m.role === "user");
}

// MARK: Conversations

function switchTo(id) {
  stop();
  store.currentId = id;
  store.saveCurrent();
  renderConversationList();
  renderMessages();
  setStatus("");
}

function removeConversation(id) {
  if (state.running && state.running.conversation.id === id) stop();
  store.remove(id);
  renderConversationList();
  renderMessages();
}

// MARK: Generation

async function send(text) {
  const c = store.current() || store.create();
  const attachments = state.pending;
  state.pending = [];
  renderPending();
  // Attachments are stored now, once; the conversation names them by key.
  store.storeAttachments(c, attachments);
  const titled = !c.messages.length;
  if (titled) c.title = (text || attachments.map((a) => a.name).join(", ")).replace(/\s+/g, " ").slice(0, 48);
  c.messages.push(attachments.length ? { role: "user", content: text, attachments } : { role: "user", content: text });
  store.save(c);
  if (titled) store.saveIndex();
  renderConversationList();
  renderMessages();
  await generate(c);
}

async function regenerate() {
  const c = store.current();
  if (!c || state.running) return;
  while (c.messages.length && c.messages[c.messages.length - 1].role === "assistant") c.messages.pop();
  if (!c.messages.length) return;
  renderMessages();
  await generate(c);
}

// Ends the running reply, if any, and silences the spoken one playing.
function stop() {
  player.silence();
  if (!state.running) return;
  const { controller, conversation, message, live, spoken } = state.running;
  message.state = "stopped";
  state.running = null;
  controller.abort();
  keepSpoken(conversation, message, spoken);
  store.save(conversation);
  live.finish(message);
  updateButtons();
  setStatus("Stopped.");
}

// A spoken reply that ended (done, stopped or failed): its WAV, built from every sample that
// came, goes with the message, stored under its own key (or for this tab, when too long).
function keepSpoken(c, message, spoken) {
  if (!spoken || message.audio) return;
  const audio = spoken.audio();
  if (!audio) return;
  message.audio = audio;
  store.storeAttachments(c, [audio]);
}

// The tool-call pieces of a delta: {index, name, arguments} each, added to the message's
// tool_calls as they stream (a call's name and arguments may come in several pieces).
function addToolCalls(message, deltas) {
  const pieces = [];
  if (!Array.isArray(deltas)) return pieces;
  message.tool_calls ||= [];
  deltas.forEach((d, position) => {
    if (!d || typeof d !== "object") return;
    const index = Number.isInteger(d.index) && d.index >= 0 && d.index < 1024 ? d.index : position;
    const call = (message.tool_calls[index] ||= { id: "", type: "function", function: { name: "", arguments: "" } });
    if (typeof d.id === "string") call.id = d.id;
    const name = typeof d.function?.name === "string" ? d.function.name : "";
    const args = typeof d.function?.arguments === "string" ? d.function.arguments : "";
    call.function.name += name;
    call.function.arguments += args;
    pieces.push({ index, name, arguments: args });
  });
  return pieces;
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
  const speech = speechFields(state.model, $("speak").checked, $("voice").value);
  const system = $("system-prompt").value.trim();
  const messages = [
    ...(system ? [{ role: "system", content: system }] : []),
    ...c.messages.map((m) => ({ role: m.role, content: m.role === "user" ? apiContent(m) : m.content })),
  ];
  const message = { role: "assistant", content: "", state: "streaming" };
  c.messages.push(message);
  const controller = new AbortController();
  // A new reply silences the one before; a spoken one starts the audio output now, within
  // the user's action (browsers let a page start sound then).
  player.silence();
  if (speech.audio) player.prime();
  const spoken = speech.audio ? new SpokenReply(player) : null;
  renderMessages();
  const live = new LiveMessage($("messages").lastElementChild, scroller);
  state.running = { controller, conversation: c, message, live, spoken };
  updateButtons();
  setStatus("Generating…");
  store.save(c);
  const body = {
    model: state.model ? state.model.id : "default",
    messages,
    stream: true,
    stream_options: { include_usage: true },
    ...fields,
    ...speech,
  };
  try {
    const response = await api("/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!response.ok) throw new Error(await errorMessage(response));
    await readEvents(response, (event) => {
      if (message.state !== "streaming") return;
      if (event.error) throw new Error(event.error.message || "the server failed");
      if (event.usage) {
        message.usage = event.usage;
        message.timings = event.timings;
      }
      for (const choice of event.choices || []) {
        const delta = choice.delta || {};
        // A spoken reply's text is its transcript; its audio plays as it comes.
        const transcript = spoken ? spoken.add(delta.audio) : "";
        const content = (typeof delta.content === "string" ? delta.content : "") + transcript;
        const reasoning = typeof delta.reasoning_content === "string" ? delta.reasoning_content : "";
        if (content) message.content += content;
        if (reasoning) message.reasoning = (message.reasoning || "") + reasoning;
        const calls = addToolCalls(message, delta.tool_calls);
        if (choice.finish_reason) message.finish_reason = choice.finish_reason;
        live.add(content, reasoning, calls);
      }
      store.saveSoon(c);
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
    keepSpoken(c, message, spoken);
    store.save(c);
    if (live.el.isConnected) live.finish(message);
    updateButtons();
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
  if (event.key === "Escape" && (state.running || player.playing) && !$("key-dialog").open) {
    event.preventDefault();
    stop();
  }
});

$("stop").addEventListener("click", stop);
$("regenerate").addEventListener("click", regenerate);
$("new-chat").addEventListener("click", () => {
  stop();
  // An empty conversation is reused rather than listed twice.
  if (store.current()?.messages.length !== 0) store.create();
  renderConversationList();
  renderMessages();
  setStatus("");
  $("message").focus();
});
$("toggle-history").addEventListener("click", () => openHistory($("history").hidden));
$("toggle-settings").addEventListener("click", () => openSettings($("settings").hidden));
$("close-settings").addEventListener("click", () => openSettings(false));
$("reset-settings").addEventListener("click", () => {
  resetSettings();
  $("settings-error").textContent = "";
});
for (const el of document.querySelectorAll("[data-setting]")) el.addEventListener("change", storeSettings);

// Another tab changed the conversations: show them (unless this tab is generating).
window.addEventListener("storage", (event) => {
  if (event.storageArea !== localStorage || !ConversationStore.concerns(event.key) || state.running) return;
  store.load();
  renderConversationList();
  renderMessages();
});
// Conversations dropped to make room in a full storage leave the list.
store.onDrop = renderConversationList;

// MARK: Start

store.load({ sweep: true });
loadSettings();
setUpKeyDialog();
openHistory(window.matchMedia("(min-width: 60rem)").matches);
openSettings(false);
renderConversationList();
renderMessages();
loadModel();
