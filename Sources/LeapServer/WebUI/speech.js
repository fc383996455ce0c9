// Spoken replies, with a model that speaks (its /v1/models entry lists "audio" in
// `architecture.output_modalities`: LFM2.5-Audio served with its vocoder and audio
// tokenizer). With "Speak replies" on, a request asks for `modalities: ["text", "audio"]`
// and `audio: {voice, format: "pcm16"}`; the stream's `delta.audio` chunks carry base64
// pcm16 (24 kHz, mono) and the transcript. Each chunk is played as it arrives (Web Audio
// API: decoded to Float32 and scheduled right after the chunk before it), and when the
// reply ends the page builds a WAV of all its samples for the reply's player.
//
// In memory a spoken reply's audio is { id, samples, data (a WAV data URL, or null), key };
// `key` names its data in localStorage (storage.js keeps it as it keeps attachments).
import { element } from "./dom.js";

export const SAMPLE_RATE = 24000;
// Seconds between now and the start of a chunk that does not follow one still playing (the
// first of a reply, or one that came after the one before had ended).
const LEAD = 0.05;
const WAV_DATA_URL = /^data:audio\/wav;base64,[A-Za-z0-9+/=]*$/;

/** Whether the model speaks, as /v1/models says it (`architecture.output_modalities`). */
export function modelSpeaks(model) {
  const outputs = model?.architecture?.output_modalities || model?.output_modalities || [];
  return Array.isArray(outputs) && outputs.includes("audio");
}

/** The request fields of a spoken reply: {} unless the model speaks and `on`. */
export function speechFields(model, on, voice) {
  if (!on || !modelSpeaks(model)) return {};
  return { modalities: ["text", "audio"], audio: { voice: voice || "us_female", format: "pcm16" } };
}

/** Plays 24 kHz chunks back to back, each as soon as it is added, through one AudioContext. */
export class SpeechPlayer {
  constructor() {
    this.context = null;
    // The chunks scheduled and not yet ended, and when the last one ends (context time).
    this.sources = new Set();
    this.next = 0;
    // Called when the last scheduled chunk has ended or was silenced.
    this.onIdle = () => {};
  }

  /** Makes (or resumes) the audio context. Called from the user's action (Send, Enter,
   * Regenerate): browsers let a page start sound then. */
  prime() {
    try {
      if (!this.context) {
        try {
          // At the chunks' own rate: the context resamples its output once, not each chunk.
          this.context = new AudioContext({ sampleRate: SAMPLE_RATE });
        } catch {
          this.context = new AudioContext();
        }
      }
      if (this.context.state === "suspended") this.context.resume().catch(() => {});
    } catch {
      this.context = null;
    }
  }

  get playing() {
    return this.sources.size > 0;
  }

  /** Schedules `samples` (Float32Array at 24 kHz) to play when the chunk before ends. */
  play(samples) {
    const context = this.context;
    if (!context || !samples.length) return;
    const buffer = context.createBuffer(1, samples.length, SAMPLE_RATE);
    buffer.copyToChannel(samples, 0);
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    const at = Math.max(this.next, context.currentTime + LEAD);
    source.start(at);
    this.next = at + samples.length / SAMPLE_RATE;
    this.sources.add(source);
    source.onended = () => {
      this.sources.delete(source);
      if (!this.sources.size) this.onIdle();
    };
  }

  /** Stops the chunk playing and drops those scheduled. */
  silence() {
    const had = this.sources.size > 0;
    for (const source of this.sources) {
      source.onended = null;
      try {
        source.stop();
      } catch {
        // never started
      }
    }
    this.sources.clear();
    this.next = 0;
    if (had) this.onIdle();
  }
}

/** One spoken reply as it streams: its pcm16 bytes, played through `player` as they come. */
export class SpokenReply {
  constructor(player) {
    this.player = player;
    this.id = null;
    this.chunks = [];
    this.bytes = 0;
    // A byte of a sample split between two chunks (the server sends whole samples).
    this.carry = null;
  }

  get samples() {
    return this.bytes >> 1;
  }

  /** One `delta.audio`: plays its samples; returns its transcript text. */
  add(audio) {
    if (!audio || typeof audio !== "object") return "";
    if (typeof audio.id === "string") this.id = audio.id;
    if (typeof audio.data === "string" && audio.data) {
      let bytes;
      try {
        bytes = decodeBase64(audio.data);
      } catch {
        throw new Error("the server sent audio that is not base64");
      }
      if (this.carry !== null) {
        const joined = new Uint8Array(bytes.length + 1);
        joined[0] = this.carry;
        joined.set(bytes, 1);
        bytes = joined;
        this.carry = null;
      }
      if (bytes.length % 2) {
        this.carry = bytes[bytes.length - 1];
        bytes = bytes.subarray(0, bytes.length - 1);
      }
      if (bytes.length) {
        this.chunks.push(bytes);
        this.bytes += bytes.length;
        this.player.play(pcm16ToFloat(bytes));
      }
    }
    return typeof audio.transcript === "string" ? audio.transcript : "";
  }

  /** The reply's audio as the page keeps it, or null when it had no samples. */
  audio() {
    if (!this.bytes) return null;
    return { id: this.id, samples: this.samples, data: wavDataURL(this.chunks, this.bytes) };
  }
}

function decodeBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** 16-bit little-endian samples as Float32 (v / 32768, as the server's WAV reader). */
export function pcm16ToFloat(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const out = new Float32Array(bytes.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(2 * i, true) / 32768;
  return out;
}

/** A 16-bit PCM WAV file (mono, 24 kHz, a 44-byte header) of the pcm16 `chunks`, as a data URL. */
export function wavDataURL(chunks, length) {
  const bytes = new Uint8Array(44 + length);
  const view = new DataView(bytes.buffer);
  const ascii = (at, text) => {
    for (let i = 0; i < text.length; i++) bytes[at + i] = text.charCodeAt(i);
  };
  ascii(0, "RIFF");
  view.setUint32(4, 36 + length, true);
  ascii(8, "WAVE");
  ascii(12, "fmt ");
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true); // integer PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, SAMPLE_RATE, true);
  view.setUint32(28, SAMPLE_RATE * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  ascii(36, "data");
  view.setUint32(40, length, true);
  let at = 44;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return `data:audio/wav;base64,${btoa(binary)}`;
}

/** A spoken reply's player, or its length alone when its WAV was not kept. */
export function spokenView(audio) {
  const figure = element("figure", "spoken");
  const seconds = Number.isInteger(audio.samples) ? ` (${(audio.samples / SAMPLE_RATE).toFixed(1)} s)` : "";
  const kept = typeof audio.data === "string" && WAV_DATA_URL.test(audio.data);
  if (kept) {
    const player = document.createElement("audio");
    player.controls = true;
    player.preload = "metadata";
    player.src = audio.data;
    player.setAttribute("aria-label", "Spoken reply");
    figure.append(player);
  }
  figure.append(element("figcaption", "", `Spoken reply${seconds}${kept ? "" : ", not kept in this browser"}`));
  return figure;
}
