// Messages as shown: renderMessage builds a stored or finished one; LiveMessage shows a reply
// while it streams, adding each token's text at the end instead of building the message
// again, at most once per frame. A spoken reply gets its player when it ends.
import { element } from "./dom.js";
import { renderText, TextStream } from "./markup.js";
import { attachmentView } from "./attachments.js";
import { spokenView } from "./speech.js";

export function statsText(m) {
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

// A tool call: the function's name and its arguments (JSON text as the model wrote it).
function toolCallView(call) {
  const box = element("div", "tool-call");
  const title = element("div", "tool-name", "Tool call ");
  const name = element("code", "", typeof call?.function?.name === "string" ? call.function.name : "");
  title.append(name);
  const args = element("pre", "tool-args");
  const code = element("code", "", typeof call?.function?.arguments === "string" ? call.function.arguments : "");
  args.append(code);
  box.append(title, args);
  return { box, name, args: code };
}

export function renderMessage(m) {
  const el = element("article", `message ${m.role}`);
  el.dataset.role = m.role;
  el.dataset.state = m.state || "done";
  el.append(element("div", "role", m.role === "user" ? "You" : "Assistant"));
  if (m.reasoning) el.append(element("div", "thinking", m.reasoning));
  if (Array.isArray(m.attachments) && m.attachments.length) {
    const box = element("div", "attachments");
    box.append(...m.attachments.map(attachmentView));
    el.append(box);
  }
  const body = element("div", "body");
  renderText(body, m.content || "");
  el.append(body);
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls.filter(Boolean) : [];
  if (calls.length) {
    const box = element("div", "tool-calls");
    box.append(...calls.map((c) => toolCallView(c).box));
    el.append(box);
  }
  if (m.audio && typeof m.audio === "object") el.append(spokenView(m.audio));
  renderFooter(el, m);
  return el;
}

// The error and the statistics at the end of a message.
function renderFooter(el, m) {
  for (const old of el.querySelectorAll(":scope > .error, :scope > .stats")) old.remove();
  if (m.error) {
    const error = element("p", "error", m.error);
    error.setAttribute("role", "alert");
    el.append(error);
  }
  const stats = statsText(m);
  if (stats) el.append(element("div", "stats", stats));
}

/**
 * Keeps `box` scrolled to its end while the user has not scrolled away from it (read from
 * scroll events, so that a token never makes the page measure its layout).
 */
export class ScrollFollower {
  constructor(box) {
    this.box = box;
    this.following = true;
    box.addEventListener("scroll", () => {
      this.following = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    }, { passive: true });
  }

  toEnd() {
    this.box.scrollTop = this.box.scrollHeight;
    this.following = true;
  }

  follow() {
    if (this.following) this.box.scrollTop = this.box.scrollHeight;
  }
}

/**
 * A reply while it streams: `el` is its rendered (empty) message. `add` takes the text of
 * an event; the page shows it at the next frame (or within 100 ms when frames are not
 * drawn), all the events since the last one at once.
 */
export class LiveMessage {
  constructor(el, scroller) {
    this.el = el;
    this.scroller = scroller;
    this.body = el.querySelector(".body");
    this.body.replaceChildren();
    this.text = new TextStream(this.body);
    this.thinking = null;
    this.calls = [];
    this.callBox = null;
    this.pending = { content: "", reasoning: "", calls: [] };
    this.scheduled = false;
    this.flush = this.flush.bind(this);
  }

  /** Text of one event: content, reasoning, and tool-call pieces ({index, name, arguments}). */
  add(content, reasoning, calls) {
    if (content) this.pending.content += content;
    if (reasoning) this.pending.reasoning += reasoning;
    if (calls && calls.length) this.pending.calls.push(...calls);
    if (this.scheduled || !(content || reasoning || calls?.length)) return;
    this.scheduled = true;
    requestAnimationFrame(this.flush);
    setTimeout(this.flush, 100);
  }

  flush() {
    if (!this.scheduled) return;
    this.scheduled = false;
    const { content, reasoning, calls } = this.pending;
    this.pending = { content: "", reasoning: "", calls: [] };
    if (reasoning) {
      if (!this.thinking) {
        this.thinking = element("div", "thinking");
        this.el.insertBefore(this.thinking, this.el.querySelector(":scope > .attachments") || this.body);
      }
      this.thinking.append(reasoning);
    }
    if (content) this.text.append(content);
    for (const piece of calls) {
      let view = this.calls[piece.index];
      if (!view) {
        if (!this.callBox) {
          this.callBox = element("div", "tool-calls");
          this.body.after(this.callBox);
        }
        view = this.calls[piece.index] = toolCallView(null);
        // In the order of their indexes.
        const next = this.calls.slice(piece.index + 1).find(Boolean);
        this.callBox.insertBefore(view.box, next ? next.box : null);
      }
      if (piece.name) view.name.append(piece.name);
      if (piece.arguments) view.args.append(piece.arguments);
    }
    this.scroller.follow();
  }

  /** The reply ended (done, stopped or failed): the rest of its text, its spoken audio's
   * player, its state and footer. */
  finish(m) {
    this.flush();
    this.text.finish();
    if (m.audio && typeof m.audio === "object" && !this.el.querySelector(":scope > .spoken")) {
      this.el.insertBefore(spokenView(m.audio), this.el.querySelector(":scope > .error, :scope > .stats"));
    }
    this.el.dataset.state = m.state || "done";
    renderFooter(this.el, m);
    this.scroller.follow();
  }
}
