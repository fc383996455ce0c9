// Small helpers the chat page's modules share.

/** The element with this id. */
export const $ = (id) => document.getElementById(id);

/** A new element, with a class and text (set as textContent, never as HTML) when given. */
export function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

/** The status line under the conversation. */
export function setStatus(text) {
  $("status").textContent = text;
}
