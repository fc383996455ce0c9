// What the page keeps in the browser. Conversations are in localStorage, one key each:
//
//   leap-ref.index               [{id, title}], the conversations in the order they began
//   leap-ref.conversation.ID     {id, title, messages}; a message's attachments are
//                                {kind, name, size, key}, a spoken reply's audio is
//                                {id, samples, key}, their data stored apart:
//   leap-ref.attachment.KEY      an attachment's or a spoken reply's data URL (KEY is
//                                "ID.RANDOM"), written once, when its message is sent or
//                                the reply ends
//   leap-ref.current             the open conversation's id
//
// So a streaming reply rewrites its own conversation only (at most every quarter second),
// never the others and never an attachment (its own audio is stored once it ends). The index is rewritten when a conversation
// begins, gets its title or goes. Pages before this layout kept every conversation under
// leap-ref.conversations: when that key is found it is rewritten in this layout and removed.
import { KEEP_CHARS } from "./attachments.js";
import { setStatus } from "./dom.js";

export const KEYS = {
  index: "leap-ref.index",
  conversation: "leap-ref.conversation.",
  attachment: "leap-ref.attachment.",
  current: "leap-ref.current",
  settings: "leap-ref.settings",
  apiKey: "leap-ref.api-key",
  // The layout before this one: every conversation, attachments included, in one value.
  legacy: "leap-ref.conversations",
};

export function read(storage, key, fallback) {
  try {
    const text = storage.getItem(key);
    return text === null ? fallback : JSON.parse(text);
  } catch {
    return fallback;
  }
}

export function write(storage, key, value) {
  return put(storage, key, JSON.stringify(value));
}

function put(storage, key, text) {
  try {
    storage.setItem(key, text);
    return true;
  } catch {
    return false;
  }
}

const isConversation = (c) => c && typeof c.id === "string" && c.id && Array.isArray(c.messages);

function storedKeys(prefix) {
  const keys = [];
  for (let i = 0; i < localStorage.length; i++) {
    const key = localStorage.key(i);
    if (key && key.startsWith(prefix)) keys.push(key);
  }
  return keys;
}

const spokenAudio = (m) => (m.audio && typeof m.audio === "object" ? m.audio : null);

// What a message keeps apart under leap-ref.attachment.KEY: its attachments and its spoken audio.
function stored(m) {
  const audio = spokenAudio(m);
  return [...(Array.isArray(m.attachments) ? m.attachments : []), ...(audio ? [audio] : [])];
}

// A conversation as stored: attachments and spoken audio without their data.
function record(c) {
  return {
    id: c.id,
    title: c.title,
    messages: c.messages.map((m) => {
      let out = m;
      if (Array.isArray(m.attachments)) {
        out = { ...out, attachments: m.attachments.map((a) => ({ kind: a.kind, name: a.name, size: a.size, key: a.key ?? null })) };
      }
      const audio = spokenAudio(m);
      if (audio) out = { ...out, audio: { id: audio.id ?? null, samples: audio.samples ?? null, key: audio.key ?? null } };
      return out;
    }),
  };
}

/** The conversations, the open one, and their saving. */
export class ConversationStore {
  constructor() {
    this.conversations = [];
    this.currentId = null;
    // Conversations changed since their last save, and the timer that saves them.
    this.dirty = new Set();
    this.timer = null;
    // Attachments' data URLs by key.
    this.attachmentCache = new Map();
    // Called when conversations were dropped to make room.
    this.onDrop = () => {};
  }

  current() {
    return this.conversations.find((c) => c.id === this.currentId) || null;
  }

  /** Reads every conversation (after rewriting the old layout, if found). `sweep` removes
   * stored attachments that no conversation names (at start only: another tab may be
   * between storing an attachment and its message). */
  load({ sweep = false } = {}) {
    const legacy = localStorage.getItem(KEYS.legacy);
    const unsaved = legacy !== null ? this.migrate(legacy) : [];
    const index = read(localStorage, KEYS.index, []);
    const order = Array.isArray(index) ? index.map((e) => e && e.id).filter((id) => typeof id === "string") : [];
    const byId = new Map();
    for (const key of storedKeys(KEYS.conversation)) {
      const c = read(localStorage, key, null);
      if (isConversation(c) && key === KEYS.conversation + c.id) byId.set(c.id, c);
    }
    for (const c of unsaved) if (!byId.has(c.id)) byId.set(c.id, c);
    // The index's order; a conversation missing from it (an index write that failed) after.
    const ids = [...new Set(order.filter((id) => byId.has(id))), ...[...byId.keys()].filter((id) => !order.includes(id))];
    this.conversations = ids.map((id) => byId.get(id));
    const used = new Set();
    for (const c of this.conversations) {
      for (const m of c.messages) {
        // A generation cut short by a reload is no longer running.
        if (m.state === "streaming") m.state = "stopped";
        for (const a of stored(m)) {
          if (typeof a.data !== "string") a.data = this.attachmentData(a.key);
          if (typeof a.key === "string") used.add(KEYS.attachment + a.key);
        }
      }
    }
    if (sweep) for (const key of storedKeys(KEYS.attachment)) if (!used.has(key)) localStorage.removeItem(key);
    for (const c of unsaved) if (this.conversations.includes(c)) this.save(c);
    if (JSON.stringify(this.conversations.map((c) => c.id)) !== JSON.stringify(order)) this.saveIndex();
    const current = read(localStorage, KEYS.current, null);
    this.currentId = this.conversations.some((c) => c.id === current) ? current : null;
  }

  // A stored attachment's data URL (an attachment's key never changes value: read once).
  attachmentData(key) {
    if (typeof key !== "string") return null;
    if (!this.attachmentCache.has(key)) {
      const data = localStorage.getItem(KEYS.attachment + key);
      if (data === null) return null;
      this.attachmentCache.set(key, data);
    }
    return this.attachmentCache.get(key);
  }

  // The old layout, rewritten: each attachment and conversation under its own key, then
  // the index. Conversations already in the new layout with the same id are replaced (the
  // old value was written by a page still open from before). The old key goes once all
  // is written, or at once when the storage is too full to hold both; returns the
  // conversations that did not fit then (load saves them as any other, making room).
  migrate(text) {
    let list;
    try {
      list = JSON.parse(text);
    } catch {
      list = null;
    }
    const found = (Array.isArray(list) ? list : []).filter(isConversation);
    const index = read(localStorage, KEYS.index, []);
    const entries = Array.isArray(index) ? index.filter((e) => e && typeof e.id === "string") : [];
    let roomMade = false;
    const putOrMakeRoom = (key, value) => {
      if (put(localStorage, key, value)) return true;
      if (roomMade) return false;
      localStorage.removeItem(KEYS.legacy);
      roomMade = true;
      return put(localStorage, key, value);
    };
    const unsaved = [];
    for (const c of found) {
      for (const m of c.messages) {
        if (!Array.isArray(m.attachments)) continue;
        for (const a of m.attachments) {
          a.key = null;
          if (typeof a.data !== "string" || a.data.length > KEEP_CHARS) continue;
          const key = `${c.id}.${randomId()}`;
          if (putOrMakeRoom(KEYS.attachment + key, a.data)) a.key = key;
        }
      }
      if (!putOrMakeRoom(KEYS.conversation + c.id, JSON.stringify(record(c)))) unsaved.push(c);
      const entry = { id: c.id, title: c.title };
      const at = entries.findIndex((e) => e.id === c.id);
      if (at >= 0) entries[at] = entry;
      else entries.push(entry);
    }
    if (putOrMakeRoom(KEYS.index, JSON.stringify(entries))) localStorage.removeItem(KEYS.legacy);
    return unsaved;
  }

  /** A new, empty conversation, stored and made the open one. */
  create() {
    const c = { id: `c${Date.now().toString(36)}${randomId()}`, title: "New chat", messages: [] };
    this.conversations.push(c);
    this.currentId = c.id;
    this.save(c);
    this.saveIndex();
    this.saveCurrent();
    return c;
  }

  remove(id) {
    const c = this.conversations.find((o) => o.id === id);
    this.conversations = this.conversations.filter((o) => o.id !== id);
    this.dirty.delete(id);
    localStorage.removeItem(KEYS.conversation + id);
    for (const key of storedKeys(`${KEYS.attachment}${id}.`)) {
      localStorage.removeItem(key);
      this.attachmentCache.delete(key.slice(KEYS.attachment.length));
    }
    if (c) for (const m of c.messages) for (const a of stored(m)) a.key = null;
    if (this.currentId === id) this.currentId = null;
    this.saveIndex();
    this.saveCurrent();
  }

  saveIndex() {
    write(localStorage, KEYS.index, this.conversations.map((c) => ({ id: c.id, title: c.title })));
  }

  saveCurrent() {
    write(localStorage, KEYS.current, this.currentId);
  }

  /** Stores each attachment's data (or a spoken reply's audio) under its own key, once; one
   * too long to keep, or that does not fit, is kept by name only (and for this tab). */
  storeAttachments(c, attachments) {
    for (const a of attachments) {
      a.key = null;
      if (typeof a.data !== "string" || a.data.length > KEEP_CHARS) continue;
      const key = `${c.id}.${randomId()}`;
      if (put(localStorage, KEYS.attachment + key, a.data)) {
        a.key = key;
        this.attachmentCache.set(key, a.data);
      } else setStatus(`The browser's storage is full: ${a.name || "the spoken reply"} is kept for this tab only.`);
    }
  }

  /** Saves `c` now. When the storage is full, the stored attachments and spoken audio go
   * first (kept by name only), then the oldest other conversations. */
  save(c) {
    this.dirty.delete(c.id);
    if (!this.conversations.includes(c)) return false;
    const key = KEYS.conversation + c.id;
    const value = JSON.stringify(record(c));
    if (put(localStorage, key, value)) return true;
    const attachments = storedKeys(KEYS.attachment);
    if (attachments.length) {
      for (const k of attachments) localStorage.removeItem(k);
      this.attachmentCache.clear();
      setStatus("The browser's storage is full: attachments and spoken replies are kept by name only.");
      if (put(localStorage, key, value)) return true;
    }
    let dropped = false;
    for (;;) {
      const oldest = this.conversations.find((o) => o !== c);
      if (!oldest) break;
      this.remove(oldest.id);
      dropped = true;
      if (put(localStorage, key, value)) {
        this.onDrop();
        return true;
      }
    }
    if (dropped) this.onDrop();
    setStatus("Could not save the conversation: the browser's storage is full.");
    return false;
  }

  /** Saves `c` within a quarter second (a streaming reply: at most four saves a second). */
  saveSoon(c) {
    this.dirty.add(c.id);
    if (this.timer !== null) return;
    this.timer = setTimeout(() => this.flush(), 250);
  }

  /** Saves the conversations changed since their last save. */
  flush() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    for (const id of [...this.dirty]) {
      const c = this.conversations.find((o) => o.id === id);
      if (c) this.save(c);
      else this.dirty.delete(id);
    }
  }

  /** Whether a `storage` event (another tab's write) changes the conversations. */
  static concerns(key) {
    return key === null || key === KEYS.index || key === KEYS.legacy || key.startsWith(KEYS.conversation);
  }
}

function randomId() {
  return Math.random().toString(36).slice(2, 10);
}
