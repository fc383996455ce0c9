// Attachments of user messages, with a model that reads images or audio: PNG or JPEG images
// (sent as image_url data URLs) and WAV files (input_audio parts). In memory an attachment
// is { kind: "image" | "audio", name, size, data (a data URL, or null), key }; `key` names
// its data in localStorage (storage.js), or is null when the data is not stored.
import { element } from "./dom.js";

export const MAX_ATTACHMENT_BYTES = 16 * 1024 * 1024;
// A data URL longer than this is kept in memory for this tab only: after a reload the
// message shows the file's name and the attachment is no longer sent.
export const KEEP_CHARS = 1_000_000;
export const IMAGE_TYPES = ["image/png", "image/jpeg"];
export const AUDIO_TYPES = ["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"];
const SAFE_DATA_URL = /^data:(image\/(png|jpeg)|audio\/(wav|x-wav|wave|vnd\.wave)|application\/octet-stream);base64,[A-Za-z0-9+/=]*$/;

const isSafe = (a) => typeof a.data === "string" && SAFE_DATA_URL.test(a.data);

/** What the model reads besides text, as /v1/models says it (`input_modalities`, or
 * OpenRouter's `architecture.input_modalities`). */
export function modelInputs(model) {
  const inputs = model?.input_modalities || model?.architecture?.input_modalities || [];
  return { image: inputs.includes("image"), audio: inputs.includes("audio") };
}

/** "image", "audio", or null, from the file's type or, without one, its name. */
export function attachmentKind(file) {
  const type = (file.type || "").toLowerCase();
  const name = file.name.toLowerCase();
  if (IMAGE_TYPES.includes(type) || (!type && /\.(png|jpe?g)$/.test(name))) return "image";
  if (AUDIO_TYPES.includes(type) || (!type && name.endsWith(".wav"))) return "audio";
  return null;
}

export function readDataURL(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error || new Error("the file cannot be read"));
    reader.readAsDataURL(file);
  });
}

/** An attachment as shown: an image's thumbnail or a WAV file's player, with its name; by
 * name only when its data was not kept (or is not a data URL this page wrote). */
export function attachmentView(a) {
  const figure = element("figure", `attachment ${a.kind === "audio" ? "audio" : "image"}`);
  const name = String(a.name || (a.kind === "audio" ? "audio" : "image"));
  const safe = isSafe(a);
  if (safe && a.kind === "image") {
    const img = element("img", "thumb");
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
  figure.append(element("figcaption", "", safe ? name : `${name} (not kept in this browser)`));
  return figure;
}

/** A stored message's content as the API takes it: text, or its kept attachments (images
 * as image_url data URLs, WAV files as input_audio) followed by its text. */
export function apiContent(m) {
  const kept = (Array.isArray(m.attachments) ? m.attachments : []).filter(isSafe);
  if (!kept.length) return m.content;
  const parts = kept.map((a) =>
    a.kind === "audio"
      ? { type: "input_audio", input_audio: { data: a.data.slice(a.data.indexOf(",") + 1), format: "wav" } }
      : { type: "image_url", image_url: { url: a.data } },
  );
  if (m.content) parts.push({ type: "text", text: m.content });
  return parts;
}
