// Model text in the page: fenced code blocks (```lang ... ```) as <pre class="code"> with a
// <code>, `inline code` as <code class="inline">, the rest as text nodes. Model text only
// ever goes in as text nodes or textContent, never as HTML.

/** Renders the whole of `text` into `container` (a stored or finished message). */
export function renderText(container, text) {
  container.replaceChildren();
  const fence = /```([^\n`]*)\n?([\s\S]*?)(?:```|$)/g;
  let last = 0;
  for (let m; (m = fence.exec(text)) !== null; ) {
    if (m.index === fence.lastIndex) fence.lastIndex++;
    // The line breaks around a block are the block's own.
    renderInline(container, text.slice(last, m.index).replace(/\n$/, ""));
    const block = codeBlock(container, null);
    if (m[1].trim()) block.pre.insertBefore(lang(m[1].trim()), block.code);
    block.code.textContent = m[2].replace(/\n$/, "");
    last = fence.lastIndex;
    if (text[last] === "\n") last++;
    if (last >= text.length) break;
  }
  renderInline(container, text.slice(last));
}

/** Text without code blocks: text nodes, and `inline code` as <code class="inline">. */
function renderInline(container, text, before = null) {
  if (!text) return;
  const parts = text.split(/`([^`\n]+)`/);
  parts.forEach((part, i) => {
    if (i % 2 === 1) container.insertBefore(inlineCode(part), before);
    else if (part) container.insertBefore(document.createTextNode(part), before);
  });
}

function inlineCode(text) {
  const code = document.createElement("code");
  code.className = "inline";
  code.textContent = text;
  return code;
}

function lang(text) {
  const span = document.createElement("span");
  span.className = "lang";
  span.textContent = text;
  return span;
}

function codeBlock(container, before) {
  const pre = document.createElement("pre");
  pre.className = "code";
  const code = document.createElement("code");
  pre.append(code);
  container.insertBefore(pre, before);
  return { pre, code };
}

const isFencePrefix = (s, i) => s.length - i < 3 && /^`*$/.test(s.slice(i));

/**
 * The same rendering as renderText, built while the text streams in: `append` places the new
 * text after what is already shown, adding nodes at the end only, so a token costs what
 * the token is, not what the message is. A code fence that opens mid-stream is shown as a
 * code block at once, its code growing until the fence closes. Text whose meaning the
 * next characters decide (a backtick that may open `inline code` or a fence, the line break
 * before a fence, which the block takes) is shown as plain text at the end meanwhile.
 * After `finish`, the container holds what renderText would make of the whole text.
 */
export class TextStream {
  constructor(container) {
    this.container = container;
    // "prose", "lang" (after an opening fence, up to the line break) or "code".
    this.mode = "prose";
    // Text received and not yet placed for good.
    this.buffer = "";
    // Prose: a line break held back (a fence right after it takes it).
    this.newline = false;
    // Prose: the line break right after a closing fence is the fence's own.
    this.skipNewline = false;
    this.block = null;
    this.langText = "";
    this.langSpan = null;
    // The end of what is shown: the held-back text, as one text node.
    this.tail = document.createTextNode("");
    container.append(this.tail);
    this.finished = false;
  }

  append(text) {
    if (!text || this.finished) return;
    this.buffer += text;
    while (this.mode === "prose" ? this.prose() : this.mode === "lang" ? this.lang() : this.code());
    this.tail.data = (this.mode === "prose" && this.newline ? "\n" : "") + this.buffer;
  }

  /** Places the held-back text as the end of the whole text. */
  finish() {
    if (this.finished) return;
    this.finished = true;
    this.tail.remove();
    if (this.mode === "prose") {
      const rest = this.skipNewline && this.buffer[0] === "\n" ? this.buffer.slice(1) : this.buffer;
      renderInline(this.container, (this.newline ? "\n" : "") + rest);
    } else if (this.mode === "code") {
      const rest = this.buffer.replace(/\n$/, "");
      if (rest) this.block.code.append(rest);
    }
    this.buffer = "";
  }

  emit(node) {
    this.tail.parentNode.insertBefore(node, this.tail);
  }

  // Text, added to the text node before the tail while that is short (fewer nodes for the
  // page to lay out, and no copying of long strings).
  emitText(text) {
    const before = this.tail.previousSibling;
    if (before && before.nodeType === Node.TEXT_NODE && before.length < 512) before.appendData(text);
    else this.emit(document.createTextNode(text));
  }

  // Prose up to the next fence: text, `inline code`, line breaks. Returns true when a fence
  // opened (the buffer then starts after it), false when it needs more text.
  prose() {
    let b = this.buffer;
    if (this.skipNewline) {
      if (!b) return false;
      if (b[0] === "\n") b = b.slice(1);
      this.skipNewline = false;
    }
    let i = 0;
    let text = "";
    const flush = () => {
      if (text) this.emitText(text);
      text = "";
    };
    for (;;) {
      if (this.newline) {
        if (i >= b.length || (b[i] === "`" && isFencePrefix(b, i))) break;
        this.newline = false;
        if (b.startsWith("```", i)) {
          flush();
          return this.open(b.slice(i + 3));
        }
        text += "\n";
      }
      let j = i;
      while (j < b.length && b[j] !== "\n" && b[j] !== "`") j++;
      text += b.slice(i, j);
      i = j;
      if (i >= b.length) break;
      if (b[i] === "\n") {
        this.newline = true;
        i++;
        continue;
      }
      // A backtick: a fence, or maybe `inline code`, whose closing backtick is the next
      // one on the line (unless that one opens a fence).
      if (b.startsWith("```", i)) {
        flush();
        return this.open(b.slice(i + 3));
      }
      if (isFencePrefix(b, i)) break;
      let k = i + 1;
      while (k < b.length && b[k] !== "`" && b[k] !== "\n") k++;
      if (k >= b.length || (b[k] === "`" && isFencePrefix(b, k))) break;
      if (b[k] === "\n" || k === i + 1 || b.startsWith("```", k)) {
        text += "`";
        i++;
        continue;
      }
      flush();
      this.emit(inlineCode(b.slice(i + 1, k)));
      i = k + 1;
    }
    flush();
    this.buffer = b.slice(i);
    return false;
  }

  open(rest) {
    this.block = codeBlock(this.container, this.tail);
    this.langText = "";
    this.langSpan = null;
    this.buffer = rest;
    this.mode = "lang";
    return true;
  }

  // The fence's language, up to a line break (the block's own) or a backtick.
  lang() {
    const b = this.buffer;
    let j = 0;
    while (j < b.length && b[j] !== "\n" && b[j] !== "`") j++;
    if (j > 0) {
      this.langText += b.slice(0, j);
      const name = this.langText.trim();
      if (name && !this.langSpan) {
        this.langSpan = lang(name);
        this.block.pre.insertBefore(this.langSpan, this.block.code);
      } else if (name) {
        this.langSpan.textContent = name;
      }
    }
    if (j >= b.length) {
      this.buffer = "";
      return false;
    }
    this.buffer = b.slice(b[j] === "\n" ? j + 1 : j);
    this.mode = "code";
    this.block.code.append(this.tail);
    return true;
  }

  // Code up to the closing fence. Holds back the text's end while it may be the start of
  // the closing fence, and a line break before it (the block's own).
  code() {
    const b = this.buffer;
    const end = b.indexOf("```");
    if (end >= 0) {
      const rest = b.slice(0, end).replace(/\n$/, "");
      if (rest) this.emitText(rest);
      this.container.append(this.tail);
      this.block = null;
      this.buffer = b.slice(end + 3);
      this.mode = "prose";
      this.skipNewline = true;
      return true;
    }
    let keep = 0;
    while (keep < 2 && keep < b.length && b[b.length - 1 - keep] === "`") keep++;
    if (b[b.length - 1 - keep] === "\n") keep++;
    if (b.length > keep) this.emitText(b.slice(0, b.length - keep));
    this.buffer = b.slice(b.length - keep);
    return false;
  }
}
