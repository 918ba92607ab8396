// The Tidings web notification center: banners, the center, the expanded notification,
// consent prompts and Settings ▸ Notifications. Plain JavaScript; every string that comes
// from an app is put into the page as text (textContent), never as markup.
"use strict";

const csrf = document.querySelector('meta[name="csrf"]').content;
const state = {
  apps: new Map(),          // bundle id → {app, name, hasIcon, settings, contentExtensionCategories}
  notifications: new Map(), // "app\n id" → notification view
  badges: new Map(),        // bundle id → count
  prompts: [],              // consent prompts waiting
  expandedGroups: new Set(),
  settingsApp: null,
};
// What the page did, for the browser tests and the benchmark (no data the page lacks).
const trace = { banners: [], sounds: [] };
window.tidingsTrace = trace;

const $ = (selector, root = document) => root.querySelector(selector);
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}
const key = (app, id) => app + "\n" + id;

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Tidings-CSRF": csrf },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  if (!response.ok) {
    const text = await response.text();
    showError(text.trim() || response.statusText);
    throw new Error(text);
  }
  return response;
}

function showError(message) {
  const banner = el("div", "banner error", message);
  $("#banners").prepend(banner);
  setTimeout(() => banner.remove(), 6000);
}

// MARK: Loading and live updates

// The state is read over HTTP and its changes come over the WebSocket: two connections,
// so an event can arrive while a state read from before it is on its way. Events that
// arrive during a read are kept (`eventsDuringLoads`) and applied again on top of the state
// it returns, in the order they came; the socket's later events follow as usual. Each event
// sets or removes what it names, so applying one again leaves the same state.
let loadsInFlight = 0;
let eventsDuringLoads = [];

async function load() {
  loadsInFlight += 1;
  const since = eventsDuringLoads.length;
  try {
    const response = await fetch("/api/state", { credentials: "same-origin" });
    if (!response.ok) { showError(await response.text()); return; }
    const data = await response.json();
    state.apps = new Map(data.apps.map((app) => [app.app, app]));
    state.notifications = new Map(data.notifications.map((n) => [key(n.app, n.identifier), n]));
    state.prompts = data.prompts;
    for (const event of eventsDuringLoads.slice(since)) apply(event);
  } finally {
    loadsInFlight -= 1;
    if (loadsInFlight === 0) eventsDuringLoads = [];
  }
  renderCenter();
  renderSettings();
  showNextPrompt();
  document.body.dataset.loaded = String(Date.now());
  openReplyFromHash();
}

let socket = null;
function connect() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  socket = new WebSocket(scheme + "//" + location.host + "/api/events");
  socket.onopen = () => { $("#connection").classList.add("live"); load(); };
  socket.onclose = () => {
    $("#connection").classList.remove("live");
    setTimeout(connect, 1000);
  };
  socket.onmessage = (message) => handle(JSON.parse(message.data));
}

function handle(event) {
  apply(event);
  if (loadsInFlight > 0) eventsDuringLoads.push(event);
  switch (event.type) {
    case "present": {
      const n = event.notification;
      if (!state.apps.has(n.app)) load();
      if (n.banner) showBanner(n);
      if (n.playSound) playSound(n);
      scheduleRender();
      break;
    }
    case "withdraw":
      for (const id of event.identifiers) {
        for (const banner of document.querySelectorAll(".banner")) {
          if (banner.dataset.app === event.app && banner.dataset.id === id) banner.remove();
        }
      }
      scheduleRender();
      break;
    case "badge":
      scheduleRender();
      break;
    case "consent":
    case "consentAnswered":
      showNextPrompt();
      break;
    case "extension":
      if (event.session === extensionSession) extensionOutcome(event.outcome);
      break;
    case "settings":
      renderSettings();
      scheduleRender();
      break;
  }
}

// What an event changes in `state`: the same on its arrival and when applied again after a
// state read (`load`); what it shows (banners, sounds, prompts, the view) is `handle`'s.
function apply(event) {
  switch (event.type) {
    case "present": {
      const n = event.notification;
      if (n.list) state.notifications.set(key(n.app, n.identifier), n);
      else state.notifications.delete(key(n.app, n.identifier));
      if (n.badge !== null && n.badge !== undefined) state.badges.set(n.app, n.badge);
      break;
    }
    case "withdraw":
      for (const id of event.identifiers) state.notifications.delete(key(event.app, id));
      break;
    case "badge":
      state.badges.set(event.app, event.count);
      break;
    case "consent":
      if (!state.prompts.some((p) => p.id === event.prompt.id)) state.prompts.push(event.prompt);
      break;
    case "consentAnswered":
      state.prompts = state.prompts.filter((p) => p.id !== event.id);
      break;
    case "settings": {
      const app = state.apps.get(event.app);
      if (app) app.settings = event.settings;
      break;
    }
  }
}

let renderPending = false;
function scheduleRender() {
  if (renderPending) return;
  renderPending = true;
  requestAnimationFrame(() => {
    renderPending = false;
    renderCenter();
    renderSettingsList();
  });
}

// MARK: Notification cards

function appName(app) { return state.apps.get(app)?.name ?? app; }

function iconFor(app) {
  const info = state.apps.get(app);
  if (info?.hasIcon) {
    const img = el("img", "app-icon");
    img.src = "/icons/" + encodeURIComponent(app);
    img.alt = "";
    return img;
  }
  const letter = el("span", "app-icon letter", (info?.name ?? app).trim().charAt(0).toUpperCase() || "?");
  let hash = 0;
  for (const c of app) hash = (hash * 31 + c.charCodeAt(0)) >>> 0;
  letter.style.backgroundColor = "hsl(" + (hash % 360) + ", 55%, 45%)";
  return letter;
}

function relativeTime(ms) {
  const seconds = Math.max(0, (Date.now() - ms) / 1000);
  if (seconds < 60) return "now";
  if (seconds < 3600) return Math.floor(seconds / 60) + "m ago";
  if (seconds < 86400) return Math.floor(seconds / 3600) + "h ago";
  return new Date(ms).toLocaleDateString();
}

// `%u` (count) and `%@` (text) in Apple's format strings, positional forms too.
function formatString(format, count, text) {
  return format.replace(/%(?:\d\$)?(l?l?[ud]|@|%)/g, (match, kind) => {
    if (kind === "%") return "%";
    return kind === "@" ? text : String(count);
  });
}

function threadCount(n) {
  let count = 0;
  for (const other of state.notifications.values()) {
    if (other.app === n.app && other.thread === n.thread) count++;
  }
  return Math.max(count, 1);
}

// The body as the person sees it: the category's placeholder when previews are hidden.
function bodyText(n) {
  if (!n.previewsHidden) return n.body;
  const placeholder = n.category?.hiddenPreviewsBodyPlaceholder;
  return placeholder ? formatString(placeholder, threadCount(n), "") : "Notification";
}

// MARK: Thumbnails

// The first attachment's thumbnail, as iOS draws it: hidden with ThumbnailHidden; the
// normalized ClippingRect stretched over the thumbnail; ThumbnailTime picks the still: a
// movie's frame at that many seconds, an animated image's frame of that number (0 without
// the option), past the end the last one. Images are decoded by the browser's own decoder
// (WebCodecs ImageDecoder), never by the center.
function thumbnail(n) {
  const a = n.attachments[0];
  if (!a || a.thumbnailHidden || a.kind === "audio") return null;
  const box = el("div", "thumbnail");
  box.dataset.url = a.url;
  const clip = normalizedClip(a.clip);
  if (a.kind === "movie") {
    box.append(movieStill(a, clip));
    return box;
  }
  if (mayAnimate(a) && "ImageDecoder" in window) {
    const frame = a.time == null ? 0 : Math.floor(a.time);
    stillFrame(a.url, frame, clip).then(({ bitmap, index }) => {
      const canvas = el("canvas");
      canvas.width = bitmap.width;
      canvas.height = bitmap.height;
      canvas.getContext("2d").drawImage(bitmap, 0, 0);
      box.append(canvas);
      box.dataset.frame = index;
    }, () => imageBackground(box, a.url, clip));   // no decoder for it: the image as it is
    return box;
  }
  imageBackground(box, a.url, clip);
  return box;
}

// A GIF or PNG (APNG) may have several frames; a JPEG has one.
const mayAnimate = (a) => a.type === "com.compuserve.gif" || a.type === "public.png";

function normalizedClip(clip) {
  if (!clip || clip.length !== 4 || !(clip[2] > 0) || !(clip[3] > 0)) return null;
  return clip.map((v) => Math.min(Math.max(v, 0), 1));
}

function imageBackground(box, url, clip) {
  box.style.backgroundImage = 'url("' + url.replace(/["\\]/g, "") + '")';
  if (clip) {
    // The normalized rectangle fills the thumbnail.
    const [x, y, w, h] = clip;
    box.style.backgroundSize = (100 / Math.max(w, 0.01)) + "% " + (100 / Math.max(h, 0.01)) + "%";
    box.style.backgroundPosition = (w < 1 ? (x / (1 - w)) * 100 : 0) + "% " + (h < 1 ? (y / (1 - h)) * 100 : 0) + "%";
  }
}

// A movie's thumbnail: only its metadata is loaded, then it is seeked to the time (clamped
// to the duration), which shows that frame.
function movieStill(a, clip) {
  const video = document.createElement("video");
  video.muted = true;
  video.preload = "metadata";
  video.playsInline = true;
  const time = a.time == null ? 0 : a.time;
  video.addEventListener("loadedmetadata", () => {
    video.currentTime = thumbnailSeconds(time, video.duration);
  }, { once: true });
  video.addEventListener("seeked", () => { video.dataset.time = video.currentTime; }, { once: true });
  if (clip) {
    const [x, y, w, h] = clip;
    Object.assign(video.style, { position: "relative", objectFit: "fill", width: 100 / w + "%", height: 100 / h + "%",
                                 left: -100 * x / w + "%", top: -100 * y / h + "%" });
  }
  video.src = a.url;
  return video;
}

// ThumbnailTime in seconds for a movie of `duration`: past the end, the last frame.
function thumbnailSeconds(time, duration) {
  if (!(time > 0)) return 0;
  return Number.isFinite(duration) ? Math.min(time, Math.max(duration - 0.001, 0)) : time;
}

// Still frames, made once per (URL, frame, clip): the center redraws its cards often. The
// newest 256 are kept (each a 96 × 96 bitmap); at most 4 are decoded at once.
const stills = new Map();
const decoding = { running: 0, waiting: [] };
const stillSize = 96;

function stillFrame(url, frame, clip) {
  const cacheKey = url + "#" + frame + "#" + (clip ? clip.join(",") : "");
  let still = stills.get(cacheKey);
  if (!still) {
    still = decodeLimited(() => decodeStill(url, frame, clip));
    stills.set(cacheKey, still);
    still.catch(() => stills.delete(cacheKey));
    if (stills.size > 256) stills.delete(stills.keys().next().value);
  }
  return still;
}

async function decodeLimited(work) {
  if (decoding.running >= 4) await new Promise((resume) => decoding.waiting.push(resume));
  decoding.running += 1;
  try {
    return await work();
  } finally {
    decoding.running -= 1;
    decoding.waiting.shift()?.();
  }
}

async function decodeStill(url, frame, clip) {
  const response = await fetch(url, { credentials: "same-origin" });
  const type = response.headers.get("Content-Type") || "";
  if (!response.ok || !(await ImageDecoder.isTypeSupported(type))) throw new Error("no decoder for " + type);
  const decoder = new ImageDecoder({ data: response.body, type });
  try {
    await decoder.tracks.ready;
    await decoder.completed;   // every byte read: the frame count is final
    const count = decoder.tracks.selectedTrack ? decoder.tracks.selectedTrack.frameCount : 1;
    const index = Math.max(0, Math.min(frame, count - 1));
    const { image } = await decoder.decode({ frameIndex: index });
    try {
      const width = image.displayWidth, height = image.displayHeight;
      let [sx, sy, sw, sh] = [0, 0, width, height];
      if (clip) {
        [sx, sy, sw, sh] = [clip[0] * width, clip[1] * height, clip[2] * width, clip[3] * height];
      } else {
        // Like background-size: cover, the centred square.
        const side = Math.min(width, height);
        [sx, sy, sw, sh] = [(width - side) / 2, (height - side) / 2, side, side];
      }
      const bitmap = await createImageBitmap(image, Math.floor(sx), Math.floor(sy), Math.max(1, Math.round(sw)), Math.max(1, Math.round(sh)),
                                             { resizeWidth: stillSize, resizeHeight: stillSize, resizeQuality: "medium" });
      return { bitmap, index };
    } finally {
      image.close();
    }
  } finally {
    decoder.close();
  }
}

function card(n, options = {}) {
  const node = el("article", "card " + n.interruptionLevel);
  node.dataset.app = n.app;
  node.dataset.id = n.identifier;
  const head = el("div", "card-head");
  head.append(iconFor(n.app), el("span", "app-name", appName(n.app)));
  if (n.interruptionLevel === "timeSensitive") head.append(el("span", "level", "TIME SENSITIVE"));
  if (n.interruptionLevel === "critical") head.append(el("span", "level critical", "CRITICAL"));
  head.append(el("span", "time", relativeTime(n.date)));
  if (options.clear !== false) {
    const clear = el("button", "clear", "✕");
    clear.type = "button";
    clear.title = "Clear";
    clear.setAttribute("aria-label", "Clear");
    clear.addEventListener("click", (event) => { event.stopPropagation(); options.onClear ? options.onClear() : dismiss(n.app, [n.identifier]); });
    head.append(clear);
  }
  const main = el("div", "card-main");
  const text = el("div", "card-text");
  if (n.title) text.append(el("div", "title", n.title));
  if (n.subtitle) text.append(el("div", "subtitle", n.subtitle));
  const body = bodyText(n);
  if (body) text.append(el("div", "body", body));
  main.append(text);
  const thumb = thumbnail(n);
  if (thumb) main.append(thumb);
  node.append(head, main);
  node.addEventListener("click", () => options.onClick ? options.onClick() : expand(n));
  return node;
}

// MARK: The center

// Settings ▸ Notifications ▸ Notification Grouping, kept by the daemon with the app's other settings.
function groupingOf(app) { return state.apps.get(app)?.settings?.grouping ?? "automatic"; }

// Apps, newest first; in each, stacks by thread (or one per app, or none), newest first.
function groups() {
  const byApp = new Map();
  for (const n of state.notifications.values()) {
    if (!byApp.has(n.app)) byApp.set(n.app, []);
    byApp.get(n.app).push(n);
  }
  const result = [];
  for (const [app, list] of byApp) {
    const grouping = groupingOf(app);
    const stacks = new Map();
    for (const n of list) {
      const id = grouping === "off" ? "n:" + n.identifier : grouping === "byApp" ? "app" : "t:" + n.thread;
      if (!stacks.has(id)) stacks.set(id, []);
      stacks.get(id).push(n);
    }
    for (const [id, items] of stacks) {
      items.sort((a, b) => b.date - a.date);
      result.push({ app, id, items, newest: items[0].date });
    }
  }
  result.sort((a, b) => b.newest - a.newest);
  return result;
}

// The group's featured notification: the highest relevanceScore, the newest among equals.
function featured(items) {
  let best = items[0];
  for (const n of items) if (n.relevanceScore > best.relevanceScore) best = n;
  return best;
}

function summary(items, lead) {
  const format = lead.category?.categorySummaryFormat;
  const others = items.length - 1;
  if (!format) return others === 1 ? "1 more notification" : others + " more notifications";
  let count = 0;
  const argumentsSeen = [];
  for (const n of items) {
    count += n.summaryArgumentCount > 0 ? n.summaryArgumentCount : 1;
    if (n.summaryArgument && !argumentsSeen.includes(n.summaryArgument)) argumentsSeen.push(n.summaryArgument);
  }
  let joined = argumentsSeen.join(", ");
  if (argumentsSeen.length > 1) joined = argumentsSeen.slice(0, -1).join(", ") + " and " + argumentsSeen[argumentsSeen.length - 1];
  return formatString(format, count, joined);
}

function renderCenter() {
  const container = $("#groups");
  const fragment = document.createDocumentFragment();
  const all = groups();
  $("#empty").hidden = all.length > 0;
  for (const group of all) {
    const groupKey = group.app + "\n" + group.id;
    const node = el("section", "group");
    node.dataset.app = group.app;
    node.dataset.thread = group.items[0].thread;
    node.dataset.count = String(group.items.length);
    const expanded = state.expandedGroups.has(groupKey) || group.items.length === 1;
    if (expanded) {
      if (group.items.length > 1) {
        const head = el("div", "group-head");
        head.append(el("span", "group-title", appName(group.app)));
        const less = el("button", "show-less", "Show less");
        less.type = "button";
        less.addEventListener("click", () => { state.expandedGroups.delete(groupKey); renderCenter(); });
        const clear = el("button", "clear-group", "Clear");
        clear.type = "button";
        clear.addEventListener("click", () => dismiss(group.app, group.items.map((n) => n.identifier)));
        head.append(less, clear);
        node.append(head);
      }
      for (const n of group.items) node.append(card(n));
    } else {
      const lead = featured(group.items);
      node.classList.add("stack");
      node.append(card(lead, {
        onClick: () => { state.expandedGroups.add(groupKey); renderCenter(); },
        onClear: () => dismiss(group.app, group.items.map((n) => n.identifier)),
      }));
      const more = el("div", "more", summary(group.items, lead));
      node.append(more, el("div", "stack-shadow"));
    }
    fragment.append(node);
  }
  container.replaceChildren(fragment);
  $("#clear-all").hidden = all.length === 0;
}

async function dismiss(app, identifiers) {
  for (const id of identifiers) state.notifications.delete(key(app, id));
  scheduleRender();
  for (let i = 0; i < identifiers.length; i += 500) {
    await post("/api/dismiss", { app, identifiers: identifiers.slice(i, i + 500) });
  }
}

$("#clear-all").addEventListener("click", async () => {
  const apps = new Set([...state.notifications.values()].map((n) => n.app));
  state.notifications.clear();
  renderCenter();
  for (const app of apps) await post("/api/dismiss", { app });
});

// MARK: Banners and sounds

function bannerStyle(app) { return state.apps.get(app)?.settings?.alertStyle ?? 1; }

function showBanner(n) {
  for (const old of document.querySelectorAll(".banner")) {
    if (old.dataset.app === n.app && old.dataset.id === n.identifier) old.remove();
  }
  const persistent = bannerStyle(n.app) === 2;
  const banner = card(n, {
    onClick: () => { banner.remove(); expand(n); },
    onClear: () => banner.remove(),
    clear: persistent,
  });
  banner.classList.add("banner");
  if (persistent) banner.classList.add("persistent");
  $("#banners").prepend(banner);
  // As on iOS, a new banner takes the place of older ones (two stay visible at most).
  while ($("#banners").children.length > 2) $("#banners").lastElementChild.remove();
  requestAnimationFrame(() => {
    const shown = performance.timeOrigin + performance.now();
    banner.dataset.shown = String(shown);
    trace.banners.push({ app: n.app, id: n.identifier, shown });
  });
  if (!persistent) setTimeout(() => banner.remove(), 5000);
}

let audioContext = null;
function playSound(n) {
  const critical = n.sound?.critical || n.interruptionLevel === "critical";
  if ($("#silent").checked && !critical) { trace.sounds.push({ id: n.identifier, played: false }); return; }
  const volume = n.sound?.volume ?? 1;
  if (n.sound?.url) {
    const audio = new Audio(n.sound.url);
    audio.volume = Math.min(Math.max(volume, 0), 1);
    audio.play().catch(() => {});
  } else {
    // The default sound: two short tones.
    try {
      audioContext = audioContext || new AudioContext();
      const gain = audioContext.createGain();
      gain.gain.value = 0.2 * volume;
      gain.connect(audioContext.destination);
      [880, 1320].forEach((frequency, i) => {
        const tone = audioContext.createOscillator();
        tone.frequency.value = frequency;
        tone.connect(gain);
        tone.start(audioContext.currentTime + i * 0.12);
        tone.stop(audioContext.currentTime + i * 0.12 + 0.1);
      });
    } catch (error) { /* no audio output */ }
  }
  trace.sounds.push({ id: n.identifier, played: true, url: n.sound?.url ?? "default" });
}

// MARK: The expanded notification

let expandedNotification = null;

function expand(n) {
  expandedNotification = n;
  const overlay = $("#expanded");
  overlay.dataset.app = n.app;
  overlay.dataset.id = n.identifier;
  const head = $(".expanded-head", overlay);
  head.replaceChild(iconFor(n.app), head.firstElementChild);
  $(".app-name", overlay).textContent = appName(n.app);
  $(".time", overlay).textContent = relativeTime(n.date);
  $(".title", overlay).textContent = n.title;
  $(".subtitle", overlay).textContent = n.subtitle;
  $(".body", overlay).textContent = bodyText(n);
  const media = $(".media", overlay);
  media.replaceChildren();
  for (const a of n.attachments) {
    let node;
    if (a.kind === "image") { node = document.createElement("img"); node.alt = a.identifier; }
    else if (a.kind === "audio") { node = document.createElement("audio"); node.controls = true; }
    else { node = document.createElement("video"); node.controls = true; node.playsInline = true; }
    node.src = a.url;
    node.className = "attachment " + a.kind;
    media.append(node);
  }
  // The slot for a content extension's view (docs/content-extensions.md): nothing is
  // loaded into it unless the app declares an extension for this category and the daemon
  // hosts it.
  const slot = $(".extension-slot", overlay);
  slot.replaceChildren();
  slot.hidden = true;
  extensionSession = null;
  delete overlay.dataset.extension;
  $(".default-content", overlay).hidden = false;
  $(".media", overlay).hidden = false;
  renderActions(n.category?.actions ?? []);
  $(".reply", overlay).hidden = true;
  overlay.hidden = false;
  const categories = state.apps.get(n.app)?.contentExtensionCategories ?? [];
  if (n.categoryIdentifier && categories.includes(n.categoryIdentifier)) openExtension(n);
}

// MARK: A reply field opened from the desktop (docs/desktop.md)

// The desktop presenter opens the page at `#reply=<app>/<notification>/<action>` (each part
// percent-encoded) when the notification server has no reply field of its own. The parts
// are data: they only look a notification and its text-input action up among the ones the
// page already has; anything else shows "not found" and opens nothing.
function openReplyFromHash() {
  const prefix = "#reply=";
  if (!document.body.dataset.loaded || !location.hash.startsWith(prefix)) return;
  const parts = location.hash.slice(prefix.length).split("/");
  history.replaceState(null, "", location.pathname + location.search);
  let names = null;
  try { if (parts.length === 3) names = parts.map(decodeURIComponent); } catch (error) { names = null; }
  const n = names && state.notifications.get(key(names[0], names[1]));
  const found = n && n.app === names[0] && n.identifier === names[1];
  const action = found && (n.category?.actions ?? []).find((a) =>
    a.identifier === names[2] && a.textInputButtonTitle !== null && a.textInputButtonTitle !== undefined);
  if (!action) {
    showError("Not found: that notification's reply field is not in the center (it may have been answered or cleared).");
    return;
  }
  showTab("center");
  expand(n);
  chooseAction(action);
}
window.addEventListener("hashchange", openReplyFromHash);

// MARK: Content extensions (docs/content-extensions.md)

let extensionSession = null;

async function openExtension(n) {
  const overlay = $("#expanded");
  overlay.dataset.extension = "opening";
  let view;
  try {
    view = await (await post("/api/extension/open", { app: n.app, identifier: n.identifier })).json();
  } catch (error) {
    overlay.dataset.extension = "failed";
    return;
  }
  if (expandedNotification !== n) { if (view.frame) post("/api/extension/close", { session: view.session }); return; }
  showExtensionView(view);
}

// The extension's view in a sandboxed frame of its own (opaque origin, its own CSP; scripts
// only when the manifest allows interaction), or the default content when it failed.
function showExtensionView(view) {
  const overlay = $("#expanded");
  const slot = $(".extension-slot", overlay);
  if (!view.frame) { extensionFailed(view.failure); return; }
  extensionSession = view.session;
  let frame = slot.querySelector("iframe");
  if (!frame || frame.getAttribute("sandbox") !== view.sandbox) {
    frame = document.createElement("iframe");
    frame.setAttribute("sandbox", view.sandbox);
    frame.setAttribute("title", "Content extension");
    frame.setAttribute("referrerpolicy", "no-referrer");
    slot.replaceChildren(frame);
  }
  frame.src = view.frame;
  slot.hidden = false;
  drawMediaButton(slot, view.media);
  const width = slot.clientWidth || $(".expanded", overlay).clientWidth || 416;
  frame.style.height = Math.round(width * view.heightRatio) + "px";
  $(".default-content", overlay).hidden = view.defaultContentHidden;
  // The extension draws the attachments it wants; the default content keeps its text.
  $(".media", overlay).hidden = true;
  if (view.title) $(".app-name", overlay).textContent = view.title;
  renderActions(view.actions);
  overlay.dataset.extension = "open";
}

// The media play/pause button the extension declares (mediaPlayPauseButtonType, …Frame,
// …TintColor), drawn by the page over the frame as iOS draws it over the view: a press
// calls the extension's mediaPlay() or mediaPause(); "playing" follows what the extension
// reports (mediaPlayingStarted/Paused). Overlay buttons fade while the media plays.
function drawMediaButton(slot, media) {
  let button = slot.querySelector(".media-button");
  if (!media) { button?.remove(); return; }
  if (!button) {
    button = el("button", "media-button");
    button.type = "button";
    button.addEventListener("click", () => extensionMedia(button.dataset.playing !== "true"));
    slot.append(button);
  }
  const [x, y, width, height] = media.frame;
  Object.assign(button.style, { left: x + "px", top: y + "px", width: width + "px", height: height + "px" });
  button.style.color = media.tintColor ?? "";
  button.classList.toggle("overlay-style", media.type === 2);
  button.dataset.playing = media.playing ? "true" : "false";
  button.textContent = media.playing ? "❚❚" : "▶";
  button.setAttribute("aria-label", media.playing ? "Pause" : "Play");
}

// An interactive view's scripts post their events (ContentExtensionFrame.eventScript); the
// page relays one only from the frame of the open view, with that frame's token, which the
// center checks against the view: a frame reaches only its own extension. A view that sends
// faster than the center allows gets its events refused (429), not queued.
window.addEventListener("message", (event) => {
  const frame = $("#expanded .extension-slot iframe");
  const data = event.data;
  if (extensionSession === null || !frame || event.source !== frame.contentWindow) return;
  if (!data || data.tidings !== "event" || typeof data.element !== "string" || typeof data.value !== "string") return;
  const token = new URL(frame.src, location.href).pathname.split("/")[2];
  if (data.token !== token) return;
  extensionEvent(extensionSession, token, data.element, data.value);
});

async function extensionEvent(session, token, element, value) {
  const response = await fetch("/api/extension/event", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Tidings-CSRF": csrf },
    body: JSON.stringify({ session, token, element, value }),
    credentials: "same-origin",
  });
  // Refused: the view stays as it is. Past the rate (429) says nothing: a view that sends
  // too fast must not fill the page with error banners.
  if (!response.ok) {
    if (response.status !== 429) showError((await response.text()).trim() || response.statusText);
    return;
  }
  const result = await response.json();
  if (session === extensionSession) extensionOutcome(result);
}

async function extensionMedia(play) {
  if (extensionSession === null) return;
  const result = await (await post("/api/extension/media", { session: extensionSession, play })).json();
  extensionOutcome(result);
}

function extensionFailed(why) {
  const overlay = $("#expanded");
  extensionSession = null;
  $(".extension-slot", overlay).replaceChildren();
  $(".extension-slot", overlay).hidden = true;
  $(".default-content", overlay).hidden = false;
  $(".media", overlay).hidden = false;
  overlay.dataset.extension = "failed";
  if (why) console.warn("content extension:", why);
}

// What an action in the view, or the extension on its own, led to.
function extensionOutcome(result) {
  switch (result.outcome) {
    case "rendered": showExtensionView(result.view); break;
    case "dismissed": closeExpanded(); break;
    case "forwarded":
      if (expandedNotification) state.notifications.delete(key(expandedNotification.app, expandedNotification.identifier));
      closeExpanded(); scheduleRender(); break;
    case "failed": extensionFailed(result.failure); closeExpanded(); break;
  }
}

function renderActions(actions) {
  const container = $("#expanded .actions");
  container.replaceChildren();
  for (const action of actions) {
    const button = el("button", "action" + (action.destructive ? " destructive" : ""), action.title);
    button.type = "button";
    button.dataset.action = action.identifier;
    button.addEventListener("click", () => chooseAction(action));
    container.append(button);
  }
}

async function chooseAction(action) {
  const n = expandedNotification;
  if (!n) return;
  if (action.authenticationRequired && !(await confirmAction("“" + action.title + "” needs your confirmation (on a phone: unlock)."))) return;
  if (action.textInputButtonTitle !== null && action.textInputButtonTitle !== undefined) {
    const form = $("#expanded .reply");
    const input = $(".reply-text", form);
    input.placeholder = action.textInputPlaceholder ?? "";
    input.value = "";
    $(".reply-send", form).textContent = action.textInputButtonTitle || "Send";
    form.dataset.action = action.identifier;
    form.hidden = false;
    input.focus();
    return;
  }
  if (extensionSession !== null) { await extensionAction(action.identifier); return; }
  await respond(n, action.identifier);
}

async function extensionAction(action, text) {
  const body = { session: extensionSession, action };
  if (text !== undefined) body.text = text;
  $("#expanded .reply").hidden = true;
  const result = await (await post("/api/extension/action", body)).json();
  extensionOutcome(result);
}

$("#expanded .reply").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  if (!expandedNotification) return;
  if (extensionSession !== null) { await extensionAction(form.dataset.action, $(".reply-text", form).value); return; }
  await respond(expandedNotification, form.dataset.action, $(".reply-text", form).value);
});

async function respond(n, action, text) {
  const body = { app: n.app, identifier: n.identifier };
  if (action) body.action = action;
  if (text !== undefined) body.text = text;
  await post("/api/respond", body);
  state.notifications.delete(key(n.app, n.identifier));
  closeExpanded();
  scheduleRender();
}

// A tap on the notification's text opens the app (the default action).
$("#expanded .default-content").addEventListener("click", (event) => {
  if (event.target.closest("audio, video")) return;
  if (expandedNotification) respond(expandedNotification, null);
});

function closeExpanded() {
  if (extensionSession !== null) { post("/api/extension/close", { session: extensionSession }).catch(() => {}); extensionSession = null; }
  $("#expanded").hidden = true;
  $("#expanded .extension-slot").replaceChildren();
  expandedNotification = null;
}
$("#expanded .close").addEventListener("click", closeExpanded);

function confirmAction(message) {
  return new Promise((resolve) => {
    const overlay = $("#confirm");
    $(".alert-message", overlay).textContent = message;
    overlay.hidden = false;
    const done = (answer) => { overlay.hidden = true; resolve(answer); };
    $(".allow", overlay).onclick = () => done(true);
    $(".deny", overlay).onclick = () => done(false);
  });
}

// MARK: Consent

function showNextPrompt() {
  const overlay = $("#consent");
  const prompt = state.prompts[0];
  if (!prompt) { overlay.hidden = true; return; }
  overlay.dataset.prompt = String(prompt.id);
  $(".alert-title", overlay).textContent = "“" + prompt.appName + "” Would Like to Send You Notifications";
  const kinds = prompt.options.length ? prompt.options.join(", ") : "alerts, sounds, and icon badges";
  $(".alert-message", overlay).textContent = "Notifications may include " + kinds + ". These can be configured in Settings.";
  const answer = async (allow) => {
    state.prompts = state.prompts.filter((p) => p.id !== prompt.id);
    overlay.hidden = true;
    try { await post("/api/consent", { id: prompt.id, allow }); } finally { showNextPrompt(); load(); }
  };
  $(".allow", overlay).onclick = () => answer(true);
  $(".deny", overlay).onclick = () => answer(false);
  overlay.hidden = false;
}

// MARK: Settings ▸ Notifications

function renderSettings() {
  renderSettingsList();
  if (state.settingsApp) renderAppSettings(state.settingsApp);
}

function renderSettingsList() {
  const list = $("#settings-apps");
  const fragment = document.createDocumentFragment();
  const apps = [...state.apps.values()].sort((a, b) => a.name.localeCompare(b.name));
  for (const app of apps) {
    const row = el("button", "settings-row");
    row.type = "button";
    row.dataset.app = app.app;
    row.append(iconFor(app.app), el("span", "row-name", app.name), el("span", "row-detail", describe(app.settings)));
    const badge = state.badges.get(app.app);
    if (badge) row.append(el("span", "badge", badge));
    row.addEventListener("click", () => { state.settingsApp = app.app; renderAppSettings(app.app); });
    fragment.append(row);
  }
  if (!apps.length) fragment.append(el("p", "empty", "No apps are installed."));
  list.replaceChildren(fragment);
}

function describe(s) {
  if (s.authorizationStatus === 0) return "Not Asked";
  if (s.authorizationStatus === 1) return "Off";
  const parts = [];
  if (s.alertSetting === 2) parts.push("Banners");
  if (s.soundSetting === 2) parts.push("Sounds");
  if (s.badgeSetting === 2) parts.push("Badges");
  if (s.authorizationStatus === 3) return "Deliver Quietly";
  return parts.join(", ") || "Off";
}

function renderAppSettings(bundle) {
  const app = state.apps.get(bundle);
  const panel = $("#settings-app");
  if (!app) { panel.hidden = true; return; }
  const s = app.settings;
  const fragment = document.createDocumentFragment();
  const back = el("button", "back", "‹ Notifications");
  back.type = "button";
  back.addEventListener("click", () => { state.settingsApp = null; panel.hidden = true; $("#settings-apps").hidden = false; });
  fragment.append(back, el("h2", null, app.name));
  const change = (body) => post("/api/settings", { app: bundle, change: body }).then((r) => r.json()).then((settings) => {
    app.settings = settings;
    renderSettings();
  });
  const toggle = (label, on, name, apply) => {
    const row = el("label", "toggle");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.checked = on;
    box.name = name;
    box.addEventListener("change", () => apply(box.checked));
    row.append(el("span", null, label), box);
    return row;
  };
  const allowed = s.authorizationStatus === 2 || s.authorizationStatus === 3 || s.authorizationStatus === 4;
  fragment.append(toggle("Allow Notifications", allowed, "allow", (on) => change({ authorizationStatus: on ? 2 : 1 })));
  if (s.authorizationStatus === 3) {
    const quiet = el("p", "note", "Delivered Quietly: notifications go to the Notification Center without sounds or banners.");
    const keep = el("button", "keep", "Deliver Prominently");
    keep.type = "button";
    keep.addEventListener("click", () => change({ authorizationStatus: 2, alert: 2, sound: 2, lockScreen: 2 }));
    fragment.append(quiet, keep);
  }
  if (allowed) {
    fragment.append(el("h3", null, "ALERTS"));
    const enabled = (v) => v === 2;
    fragment.append(
      toggle("Lock Screen", enabled(s.lockScreenSetting), "lockScreen", (on) => change({ lockScreen: on ? 2 : 1 })),
      toggle("Notification Center", enabled(s.notificationCenterSetting), "notificationCenter", (on) => change({ notificationCenter: on ? 2 : 1 })),
      toggle("Banners", enabled(s.alertSetting), "banners", (on) => change({ alert: on ? 2 : 1 })));
    if (enabled(s.alertSetting)) {
      const style = el("div", "segmented");
      style.append(el("span", null, "Banner Style"));
      for (const [label, value] of [["Temporary", 1], ["Persistent", 2]]) {
        const button = el("button", s.alertStyle === value ? "selected" : "", label);
        button.type = "button";
        button.name = "style-" + label.toLowerCase();
        button.addEventListener("click", () => change({ alertStyle: value }));
        style.append(button);
      }
      fragment.append(style);
    }
    fragment.append(
      toggle("Sounds", enabled(s.soundSetting), "sounds", (on) => change({ sound: on ? 2 : 1 })),
      toggle("Badges", enabled(s.badgeSetting), "badges", (on) => change({ badge: on ? 2 : 1 })));
    if (s.timeSensitiveSetting !== 0) fragment.append(toggle("Time Sensitive Notifications", enabled(s.timeSensitiveSetting), "timeSensitive", (on) => change({ timeSensitive: on ? 2 : 1 })));
    if (s.criticalAlertSetting !== 0) fragment.append(toggle("Critical Alerts", enabled(s.criticalAlertSetting), "criticalAlert", (on) => change({ criticalAlert: on ? 2 : 1 })));
    fragment.append(el("h3", null, "OPTIONS"));
    const select = (label, name, options, value, apply) => {
      const row = el("label", "select");
      const menu = document.createElement("select");
      menu.name = name;
      for (const [text, v] of options) {
        const option = el("option", null, text);
        option.value = String(v);
        option.selected = String(v) === String(value);
        menu.append(option);
      }
      menu.addEventListener("change", () => apply(menu.value));
      row.append(el("span", null, label), menu);
      return row;
    };
    fragment.append(
      select("Show Previews", "previews", [["Always", 0], ["When Unlocked", 1], ["Never", 2]], s.showPreviewsSetting,
        (v) => change({ showPreviews: Number(v) }).then(load)),
      select("Notification Grouping", "grouping", [["Automatic", "automatic"], ["By App", "byApp"], ["Off", "off"]], groupingOf(bundle),
        (v) => change({ grouping: v }).then(scheduleRender)));
    if (s.providesAppNotificationSettings) {
      const own = el("button", "app-settings", app.name + " Notification Settings");
      own.type = "button";
      own.addEventListener("click", () => post("/api/open-settings", { app: bundle }));
      fragment.append(own);
    }
  }
  panel.replaceChildren(fragment);
  panel.hidden = false;
  $("#settings-apps").hidden = true;
}

// MARK: Tabs

function showTab(name) {
  $("#center").hidden = name !== "center";
  $("#settings").hidden = name !== "settings";
  $("#tab-center").classList.toggle("selected", name === "center");
  $("#tab-settings").classList.toggle("selected", name === "settings");
}
$("#tab-center").addEventListener("click", () => showTab("center"));
$("#tab-settings").addEventListener("click", () => showTab("settings"));
$("#silent").checked = localStorage.getItem("silent") === "1";
$("#silent").addEventListener("change", () => localStorage.setItem("silent", $("#silent").checked ? "1" : "0"));
setInterval(scheduleRender, 60000);

connect();
