// The web channel's page: the state from /api/state, live changes from /api/stream (an
// event stream read with fetch), answers POSTed to /api/answer. Agent text arrives as
// server-escaped HTML (`html`, `description_html`); everything else is put in the page with
// textContent only.
"use strict";

const sessions = new Map(); // id -> Session
const cards = new Map(); // id -> Card
const answered = []; // ids of the cards answered since the page loaded, newest first
const ANSWERED_SHOWN = 10;
let current = null; // the session shown in #session-view
let loaded = false; // whether this connection's first state has come (it picks the session)
const TIMELINE_KEPT = 2000; // entries a session's timeline keeps on the page (the board's own)

// -- the sign-in -----------------------------------------------------------------------
// Every request needs two halves: the cookie (the browser sends it) and this tab's page key,
// which the sign-in handed over in the URL's fragment. The key lives in sessionStorage, which
// belongs to this origin alone (port included), and in no HTML: a server on another port can
// be sent the cookie, never the key. A new tab asks this browser's open tabs for it.

const STORE = `aep-web-key:${location.pathname.replace(/[^/]*$/, "")}`;
const tabs = "BroadcastChannel" in window ? new BroadcastChannel(STORE) : null;
const ASK_MS = 1000; // how long a tab waits for another tab to hand it the key
let key = null;
let signedOut = false;
let generation = 0; // the current connection; an older one's loop stops
let streaming = null; // the AbortController of the open stream

function authed(options = {}) {
  return {
    ...options,
    credentials: "same-origin",
    cache: "no-store",
    headers: { ...(options.headers || {}), "X-Page-Key": key || "" },
  };
}

// the key a sign-in handed over in the URL's fragment, taken out of the address bar; the
// caller checks it with the bridge before using it (`works`): any page can link here with a
// fragment of its choosing
function takeKey() {
  const match = /^#key=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (match) history.replaceState(null, "", location.pathname + location.search); // out of sight
  return match ? match[1] : null;
}

// whether the bridge takes `candidate` as this browser's page key
async function works(candidate) {
  try {
    const reply = await fetch("api/state", {
      credentials: "same-origin",
      cache: "no-store",
      headers: { "X-Page-Key": candidate },
    });
    return reply.ok;
  } catch (error) {
    return false;
  }
}

// another tab's key, or null when no tab answers in time
function askTabs() {
  if (!tabs) return Promise.resolve(null);
  return new Promise((resolve) => {
    const heard = (event) => {
      const data = event.data || {};
      if (data.type !== "key" || typeof data.key !== "string") return;
      clearTimeout(timer);
      tabs.removeEventListener("message", heard);
      resolve(data.key);
    };
    const timer = setTimeout(() => {
      tabs.removeEventListener("message", heard);
      resolve(null);
    }, ASK_MS);
    tabs.addEventListener("message", heard);
    tabs.postMessage({ type: "want" });
  });
}

if (tabs) {
  tabs.addEventListener("message", (event) => {
    const data = event.data || {};
    if (data.type === "want" && key && !signedOut) tabs.postMessage({ type: "key", key });
    else if (data.type === "signed-in" && typeof data.key === "string" && data.key !== key) {
      const offered = data.key;
      works(offered).then((ok) => { if (ok && offered !== key) adopt(offered); });
    }
    else if (data.type === "signed-out" && !signedOut) showSignedOut(String(data.detail || "You signed out in another tab."));
  });
}

function adopt(newKey) {
  key = newKey;
  sessionStorage.setItem(STORE, key);
  signedOut = false;
  document.getElementById("signed-out").hidden = true;
  document.getElementById("board").hidden = false;
  restart();
}

let tried = null; // the key another tab's was last asked for after a refusal
let refusing = null;

// a 401: perhaps this browser signed in again in another tab (a new cookie, a new key);
// else signed out, saying why
function refused(reply) {
  if (!refusing) refusing = whyRefused(reply).finally(() => { refusing = null; });
  return refusing;
}

async function whyRefused(reply) {
  const body = await reply.json().catch(() => ({}));
  if (signedOut) return;
  if (tried !== key) {
    tried = key;
    const other = await askTabs();
    if (other && other !== key) {
      adopt(other);
      return;
    }
  }
  showSignedOut(body.detail || "You are signed out: sign in again.");
}

// text whose `backticked` spans (a command to run) are shown as code, never as backticks
function withCode(text) {
  return String(text).split("`").map((part, i) => (i % 2 ? el("code", { text: part }) : document.createTextNode(part)));
}

function showSignedOut(detail) {
  signedOut = true;
  generation++;
  if (streaming) streaming.abort();
  key = null;
  sessionStorage.removeItem(STORE);
  sessions.clear();
  cards.clear();
  answered.length = 0;
  current = null;
  loaded = false;
  forgetNote();
  for (const id of ["queue", "answered", "sessions", "timeline"]) document.getElementById(id).replaceChildren();
  document.getElementById("board").hidden = true;
  document.getElementById("sign-out").hidden = true;
  document.getElementById("signed-out").hidden = false;
  document.getElementById("signed-out-why").replaceChildren(...withCode(detail));
  document.getElementById("connection").textContent = "Signed out";
  showWaiting(0);
  document.title = "Signed out · aep-bridge";
}

async function signOut() {
  const button = document.getElementById("sign-out");
  button.disabled = true;
  try {
    const reply = await fetch("api/signout", authed({ method: "POST" }));
    const body = await reply.json().catch(() => ({}));
    if (reply.ok || reply.status === 401) {
      if (tabs) tabs.postMessage({ type: "signed-out", detail: "You signed out in another tab." });
      showSignedOut(body.detail || "You signed out.");
    } else {
      document.getElementById("connection").textContent = body.detail || "The sign-out failed: try again.";
    }
  } catch (error) {
    document.getElementById("connection").textContent = "Not signed out: the bridge cannot be reached. Try again.";
  }
  button.disabled = false;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "className") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

// -- times and marks -------------------------------------------------------------------

const AGO_EVERY_MS = 30_000; // how often the "2 min ago" texts are brought up to date

// how long ago `date` was, as a person says it: "just now", "2 min ago", "3 h ago", then the
// date (and the time, within the week)
function ago(date, now = Date.now()) {
  const seconds = Math.round((now - date.getTime()) / 1000);
  if (seconds < 45) return "just now"; // a clock a little ahead of this one's too
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  const options = hours < 24 * 7
    ? { weekday: "short", hour: "2-digit", minute: "2-digit" }
    : { year: "numeric", month: "short", day: "numeric" };
  return date.toLocaleString(undefined, options);
}

// a <time> saying how long ago `iso` was, the full date and time on hover
function when(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return null;
  return el("time", {
    className: "ago",
    datetime: date.toISOString(),
    title: date.toLocaleString(undefined, { dateStyle: "full", timeStyle: "long" }),
    text: ago(date),
  });
}

// the relative texts brought up to date, nothing else re-rendered
function refreshTimes() {
  const now = Date.now();
  for (const node of document.querySelectorAll("time.ago")) {
    const date = new Date(node.getAttribute("datetime"));
    const text = ago(date, now);
    if (node.textContent !== text) node.textContent = text;
  }
}

// the status marks the bridge writes, and what each says in words: a screen reader reads the
// words, and so does a person whose machine has no emoji font (`emojiShown` below)
const MARKS = new Map([
  ["⏳", "running"], ["✅", "done"], ["❌", "failed"], ["🚫", "denied"], ["⚠️", "warning"],
  ["⚠", "warning"], ["❓", "question"], ["🔔", "notified"], ["🔄", "in progress"], ["➖", "skipped"],
  ["⬜", "to do"],
]);
const MARK_SOURCE = [...MARKS.keys()].sort((a, b) => b.length - a.length).join("|");
const HAS_MARK = new RegExp(MARK_SOURCE, "u"); // no `g`: a test that keeps no position
const MARK = new RegExp(MARK_SOURCE, "gu");

// each status mark in `root`'s text wrapped as an image named in words; text nodes only, so
// the server's escaping is untouched
function nameMarks(root) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (HAS_MARK.test(node.data) && !node.parentElement.closest(".mark, pre, code")) found.push(node);
  }
  for (const node of found) {
    const parts = [];
    let last = 0;
    for (const match of node.data.matchAll(MARK)) {
      if (match.index > last) parts.push(document.createTextNode(node.data.slice(last, match.index)));
      const name = MARKS.get(match[0]);
      parts.push(el("span", { className: "mark", role: "img", "aria-label": name, title: name },
        el("span", { className: "glyph", text: match[0] }), el("span", { className: "word", text: `[${name}]` })));
      last = match.index + match[0].length;
    }
    if (last < node.data.length) parts.push(document.createTextNode(node.data.slice(last)));
    node.replaceWith(...parts);
  }
  return root;
}

// whether this machine draws the emoji, or an empty box (no emoji font): the mark is drawn on
// a canvas beside a character no font has; the same pixels mean the same box
function emojiShown() {
  try {
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = 32;
    const context = canvas.getContext("2d", { willReadFrequently: true });
    const draw = (text) => {
      context.clearRect(0, 0, 32, 32);
      context.font = '24px "Noto Color Emoji", "Apple Color Emoji", "Segoe UI Emoji", sans-serif';
      context.textBaseline = "top";
      context.fillStyle = "#000";
      context.fillText(text, 0, 0);
      return context.getImageData(0, 0, 32, 32).data.join(",");
    };
    const box = draw("\u{10FFFD}");
    return ["✅", "❌"].every((mark) => draw(mark) !== box);
  } catch (error) {
    return true;
  }
}

// a snapshot may be older than what the stream already gave: keep the newer copy
function newer(map, entity) {
  const known = map.get(entity.id);
  if (!known || (known.rev || 0) <= (entity.rev || 0)) map.set(entity.id, entity);
}

// a session's entries (and the queue) in the order they reached the bridge's page (`seq`),
// never by their times: two arrive within a millisecond, and an update's time is later than
// what came after the entry it updates
function byArrival(a, b) {
  return (a.seq || 0) - (b.seq || 0) || String(a.time).localeCompare(String(b.time));
}

function isOpen(card) {
  return !card.informational && (!card.outcome || !card.outcome.closed);
}

// -- answering -------------------------------------------------------------------------

async function answer(card, body, feedback, controls) {
  for (const control of controls) control.disabled = true;
  feedback.textContent = "Sending…";
  try {
    const reply = await fetch("api/answer", authed({
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ card_id: card.id, ...body }),
    }));
    if (reply.status === 401) {
      feedback.textContent = "Not sent: you are signed out.";
      refused(reply);
      return;
    }
    const result = await reply.json().catch(() => ({}));
    feedback.textContent = result.message || result.detail || `The bridge answered ${reply.status}`;
  } catch (error) {
    feedback.textContent = "The bridge cannot be reached: try again.";
  }
  for (const control of controls) control.disabled = false;
}

function fieldInput(field, id) {
  const required = field.required || null;
  if (field.type === "select" && field.multi) {
    const box = el("fieldset", { className: "field" }, el("legend", { text: field.label }));
    for (const choice of field.choices) {
      const cid = `${id}-${choice.id}`;
      box.append(el("div", { className: "check" },
        el("input", { type: "checkbox", id: cid, name: field.id, value: choice.id }),
        el("label", { for: cid, text: choice.label })));
    }
    return box;
  }
  let input;
  if (field.type === "select") {
    input = el("select", { id, name: field.id, required });
    if (!field.required) input.append(el("option", { value: "", text: "(none)" }));
    for (const choice of field.choices) input.append(el("option", { value: choice.id, text: choice.label }));
  } else if (field.type === "boolean") {
    return el("div", { className: "field check" },
      el("input", { type: "checkbox", id, name: field.id }),
      el("label", { for: id, text: field.label }));
  } else if (field.type === "number") {
    input = el("input", { type: "number", id, name: field.id, required, min: field.min, max: field.max, step: "any" });
  } else {
    input = el("input", { type: "text", id, name: field.id, required });
  }
  return el("div", { className: "field" }, el("label", { for: id, text: field.label }), input);
}

function formValues(form, fields) {
  const values = {};
  for (const field of fields) {
    if (field.type === "select" && field.multi) {
      values[field.id] = [...form.querySelectorAll(`input[name="${CSS.escape(field.id)}"]:checked`)].map((i) => i.value);
      continue;
    }
    const input = form.elements.namedItem(field.id);
    if (!input) continue;
    if (field.type === "boolean") values[field.id] = input.checked;
    else if (field.type === "number") { if (input.value !== "") values[field.id] = Number(input.value); }
    else if (input.value !== "") values[field.id] = input.value;
  }
  return values;
}

function renderCard(card, place) {
  const uid = `${place}-card-${card.id}`;
  const feedback = el("p", { className: "feedback", role: "status", "aria-live": "polite" });
  const node = el("article", {
    className: `card${isOpen(card) ? " open" : " closed"}`,
    "data-card-id": card.id,
    id: uid,
    "aria-labelledby": `${uid}-title`,
  });
  const session = sessions.get(card.session_id);
  node.append(nameMarks(el("h3", { id: `${uid}-title`, text: card.title })));
  if (session) {
    const stamp = when(card.time);
    node.append(el("p", { className: "meta" },
      el("a", { href: `#s=${encodeURIComponent(session.id)}`, text: session.title }),
      stamp ? " · " : null, stamp));
  }
  const details = el("div", { className: "details" });
  details.innerHTML = card.description_html; // escaped by the server
  node.append(nameMarks(details));
  if (card.outcome) {
    const said = when(card.outcome.time); // when it was answered, kept across a reload
    node.append(nameMarks(el("p", { className: "outcome" },
      document.createTextNode(card.outcome.summary), said ? " · " : null, said)));
  }
  if (card.informational) node.append(el("p", { className: "hint", text: "Answered in the agent's own terminal." }));
  if (isOpen(card)) {
    const controls = [];
    if (card.fields.length) {
      const form = el("form", { className: "form" });
      card.fields.forEach((field, i) => form.append(fieldInput(field, `${uid}-f${i}`)));
      const send = el("button", { type: "submit", className: "submit", text: "Send" });
      form.append(send);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        answer(card, { values: formValues(form, card.fields) }, feedback, [send]);
      });
      controls.push(send);
      node.append(form);
    }
    if (card.options.length) {
      const row = el("div", { className: "options" });
      for (const option of card.options) {
        const button = el("button", { type: "button", className: `option${option.is_allow ? " allow" : ""}`, text: option.label });
        button.addEventListener("click", () => answer(card, { option: option.index, token: option.token }, feedback, controls));
        controls.push(button);
        row.append(button);
      }
      node.append(row);
    }
    if (card.accepts_text || (!card.options.length && !card.fields.length)) {
      const id = `${uid}-text`;
      const input = el("input", { type: "text", id, autocomplete: "off" });
      const send = el("button", { type: "submit", text: "Send" });
      // what typing here does: the core sends the words as they are, and the agent reads
      // them by AEP-0008 (an option's name picks it; other words to a permission deny, the
      // words its guidance), and the question closes
      let says = "Your answer: sent to the agent as you write it";
      if (card.kind === "permission" && card.options.length) {
        says = "Or answer in words: sent to the agent as guidance, with a deny (naming an option picks it)";
      } else if (card.options.length || card.fields.length) {
        says = "Or answer in words: sent to the agent in place of a choice";
      }
      const form = el("form", { className: "text-answer" },
        el("label", { for: id, text: says }), input, send);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        if (input.value.trim()) answer(card, { text: input.value }, feedback, [send]);
      });
      controls.push(send);
      node.append(form);
    }
  }
  node.append(feedback);
  return node;
}

// -- the queue -------------------------------------------------------------------------

function renderQueue() {
  const shown = [...cards.values()].filter(isOpen).sort(byArrival);
  document.getElementById("queue").replaceChildren(...shown.map((c) => renderCard(c, "queue")));
  const done = answered.map((id) => cards.get(id)).filter(Boolean);
  document.getElementById("answered").replaceChildren(...done.map((c) => renderCard(c, "answered")));
  document.getElementById("answered-section").hidden = done.length === 0;
  const open = shown.length;
  document.getElementById("queue-count").textContent = open ? `(${open})` : "";
  document.getElementById("queue-empty").hidden = open > 0;
  showWaiting(open);
}

// -- while something waits: the tab's title, its icon, a notification ---------------------

const ICON = "static/icon.svg";
const NOTIFY = `aep-web-notify:${location.pathname.replace(/[^/]*$/, "")}`; // "on" once asked for
let iconImage = null; // the page's icon, loaded once to draw the count on
let iconShown = -1; // the count the tab's icon shows now

// the count in the tab's title and drawn on its icon ("(2) aep-bridge"); both plain again
// when nothing waits
function showWaiting(open) {
  if (!signedOut) document.title = open ? `(${open}) aep-bridge` : "aep-bridge";
  if (open === iconShown) return;
  iconShown = open;
  const link = document.querySelector('link[rel="icon"]');
  if (!open) {
    link.type = "image/svg+xml";
    link.href = ICON;
    return;
  }
  if (!iconImage) {
    iconImage = new Image();
    iconImage.addEventListener("load", () => { const n = iconShown; iconShown = -1; showWaiting(n); });
    iconImage.src = ICON;
    return;
  }
  if (!iconImage.complete) return; // drawn when it loads
  link.type = "image/png";
  link.href = badge(iconImage, open);
}

// the icon with the count on a red disc, as a data: URL (the page's CSP allows data: images)
function badge(image, count) {
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 64;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0, 64, 64);
  context.fillStyle = "#d1242f";
  context.beginPath();
  context.arc(44, 20, 20, 0, 2 * Math.PI);
  context.fill();
  context.fillStyle = "#fff";
  context.font = "bold 28px sans-serif";
  context.textAlign = "center";
  context.textBaseline = "middle";
  context.fillText(count > 9 ? "9+" : String(count), 44, 21);
  return canvas.toDataURL("image/png");
}

function notifyWanted() {
  return "Notification" in window && Notification.permission === "granted" && localStorage.getItem(NOTIFY) === "on";
}

// the button says what it does now; the browser's permission is asked on a click only
function showNotifyButton() {
  const button = document.getElementById("notify");
  if (!("Notification" in window)) {
    button.hidden = true;
    return;
  }
  button.hidden = false;
  if (Notification.permission === "denied") {
    button.textContent = "Notifications blocked by the browser";
    button.disabled = true;
  } else {
    button.textContent = notifyWanted() ? "Stop notifying me" : "Notify me of new questions";
    button.disabled = false;
  }
  button.setAttribute("aria-pressed", notifyWanted() ? "true" : "false");
}

async function toggleNotify() {
  if (notifyWanted()) {
    localStorage.removeItem(NOTIFY);
  } else {
    const permission = await Notification.requestPermission();
    if (permission === "granted") localStorage.setItem(NOTIFY, "on");
  }
  showNotifyButton();
}

// the notification shown last and the card it is about: one at a time (a new question's
// replaces it, an agent asking 200 questions makes one), taken back when its question closes
// or the page signs out, so no question's words stay behind on the screen
let note = null;

function forgetNote(cardId) {
  if (!note || (cardId !== undefined && note.cardId !== cardId)) return;
  note.shown.close();
  note = null;
}

// a notification for a new question while this tab is out of sight, naming its session;
// a click on it brings the tab and the question's session
function notifyOf(card) {
  if (!notifyWanted() || !document.hidden) return;
  const session = sessions.get(card.session_id);
  try {
    const shown = new Notification(`Question in ${session ? session.title : "an agent session"}`, {
      body: card.title, tag: "aep-web-question",
    });
    shown.addEventListener("click", () => {
      window.focus();
      location.hash = `#s=${encodeURIComponent(card.session_id)}`;
      forgetNote();
    });
    note = { shown, cardId: card.id };
  } catch (error) {
    // a browser that refuses notifications from a page (some mobile ones): the title says it
  }
}

// -- sessions --------------------------------------------------------------------------

function renderSessions() {
  const list = document.getElementById("sessions");
  const ordered = [...sessions.values()].sort((a, b) =>
    (b.pending > 0) - (a.pending > 0) || b.updated.localeCompare(a.updated));
  list.replaceChildren(...ordered.map((s) => {
    const link = el("a", {
      className: "session",
      href: `#s=${encodeURIComponent(s.id)}`,
      "data-session-id": s.id,
      "aria-current": s.id === current ? "page" : null,
    },
    el("span", { className: "title", text: s.title }),
    el("span", { className: "facts" },
      el("span", { className: "agent", text: s.agent || "agent" }),
      el("span", { className: `state ${s.state}`, text: s.state === "ended" ? "ended" : "active" }),
      s.pending ? el("span", { className: "pending", text: `${s.pending} waiting` }) : null));
    return el("li", {}, link);
  }));
  document.getElementById("sessions-empty").hidden = sessions.size > 0;
  if (current && sessions.has(current)) renderFacts(sessions.get(current));
}

function usageText(usage) {
  if (!usage) return "";
  if (usage.text) return usage.text;
  const parts = [];
  if (usage.input_tokens != null) parts.push(`${usage.input_tokens} in`);
  if (usage.output_tokens != null) parts.push(`${usage.output_tokens} out`);
  return parts.join(", ");
}

function renderFacts(session) {
  document.getElementById("session-title").textContent = session.title;
  const facts = [session.agent || "agent", session.state];
  const usage = usageText(session.usage);
  if (usage) facts.push(usage);
  document.getElementById("session-facts").textContent = facts.join(" · ");
}

function renderItem(item) {
  const node = el("div", {
    className: `item ${item.kind} type-${item.type || item.kind}`, "data-key": item.key, "data-seq": item.seq || 0,
  });
  const stamp = when(item.time);
  if (stamp) node.append(stamp);
  const body = el("div", { className: "body" });
  body.innerHTML = item.html; // escaped by the server
  node.append(nameMarks(body));
  return node;
}

function timelineCard(card) {
  const node = renderCard(card, "timeline");
  node.dataset.seq = card.seq || 0;
  return node;
}

// a new entry at its arrival position (before the first entry that arrived after it)
function insertInOrder(timeline, node) {
  const seq = Number(node.dataset.seq);
  const last = timeline.lastElementChild;
  if (!last || Number(last.dataset.seq) <= seq) {
    timeline.append(node); // nearly always: what arrives goes last
  } else {
    const later = [...timeline.children].find((other) => Number(other.dataset.seq) > seq);
    timeline.insertBefore(node, later || null);
  }
  while (timeline.children.length > TIMELINE_KEPT) timeline.firstElementChild.remove();
}

function placeCard(card) {
  const timeline = document.getElementById("timeline");
  if (card.session_id !== current) return;
  const node = timelineCard(card);
  const old = timeline.querySelector(`[data-card-id="${CSS.escape(card.id)}"]`);
  if (old) old.replaceWith(node);
  else insertInOrder(timeline, node);
}

let arrived = null; // items the stream gave while a session's timeline was being fetched

function placeItem(item) {
  if (item.session_id !== current) return;
  if (arrived) arrived.push(item);
  const timeline = document.getElementById("timeline");
  const node = renderItem(item);
  const old = timeline.querySelector(`.item[data-key="${CSS.escape(item.key)}"]`);
  if (old) old.replaceWith(node);
  else insertInOrder(timeline, node);
}

async function openSession(id) {
  current = id;
  renderSessions();
  renderAway();
  const timeline = document.getElementById("timeline");
  if (!id) return;
  arrived = [];
  const reply = await fetch(`api/sessions/${encodeURIComponent(id)}`, authed());
  if (reply.status === 401) {
    arrived = null;
    refused(reply);
    return;
  }
  if (!reply.ok) {
    arrived = null;
    document.getElementById("session-title").textContent = "This session is not known here";
    timeline.replaceChildren();
    return;
  }
  const data = await reply.json();
  if (current !== id) return;
  newer(sessions, data.session);
  for (const card of data.cards || []) newer(cards, card);
  renderFacts(data.session);
  const entries = [
    ...data.items.map((item) => ({ seq: item.seq, time: item.time, node: () => renderItem(item) })),
    ...(data.cards || []).map((card) => ({ seq: card.seq, time: card.time, node: () => timelineCard(card) })),
  ].sort(byArrival);
  timeline.replaceChildren(...entries.map((e) => e.node()));
  // what changed while the snapshot was on its way
  const revs = new Map(data.items.map((item) => [item.key, item.rev || 0]));
  const late = arrived.filter((item) => (item.rev || 0) > (revs.get(item.key) || 0));
  arrived = null;
  for (const item of late) placeItem(item);
  for (const card of cards.values()) if (card.session_id === id) placeCard(card);
}

function fromHash() {
  const match = /^#s=(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

// -- away mode -------------------------------------------------------------------------
// One switch for everywhere (in the header) and one for the open session (in its header).
// The state comes with /api/state, and each change on the stream (`event: away`), however
// it was made: this page, another channel's /away, `aep-bridge away`, automatic away.

let away = null; // the latest away state the bridge gave

function showSwitch(button, on) {
  button.textContent = on ? "Away: on" : "Away: off";
  button.dataset.away = on ? "on" : "off";
  button.setAttribute("aria-pressed", on ? "true" : "false");
}

function automatic() {
  return away && away.after_minutes ? `automatic after ${away.after_minutes} min` : "";
}

function renderAway() {
  if (!away) return;
  document.getElementById("away-all-box").hidden = false;
  // signed in as a person (`people`): the header's switch is theirs, for the sessions they own
  const person = away.person && away.person.switch !== null ? away.person : null;
  const on = person ? person.switch : away.everywhere;
  showSwitch(document.getElementById("away-all"), on);
  const all = person
    ? [`${on ? "away" : "not away"}: ${person.name}'s switch`]
    : away.everywhere ? ["away: everywhere"] : [automatic() || "not away"];
  if (person && person.by) all.push(`by ${person.by}`);
  else if (!person && away.everywhere && away.by) all.push(`by ${away.by}`);
  document.getElementById("away-all-why").textContent = all.join(", ");
  const box = document.getElementById("away-session-box");
  const mine = current ? away.sessions.find((s) => s.id === current) : null;
  box.hidden = !mine;
  if (!mine) return;
  showSwitch(document.getElementById("away-session"), mine.away);
  const why = {
    session: "away: this session's own switch",
    person: `away: ${mine.owner}'s switch`,
    everywhere: "away: everywhere",
    automatic: `away: automatic (no prompt typed in its terminal for ${away.after_minutes} min)`,
  }[mine.why];
  const said = mine.away ? [why || "away"] : [mine.switch === false ? "not away: its own switch" : "not away"];
  if (!mine.away && mine.switch !== false && automatic()) said.push(automatic());
  if (mine.switch !== null && mine.by) said.push(`by ${mine.by}`);
  if (mine.owned_by) said.push(`owner ${mine.owned_by}`);
  document.getElementById("away-session-why").textContent = said.join(", ");
}

async function switchAway(button, sessionId) {
  const on = button.dataset.away !== "on";
  const why = document.getElementById(sessionId ? "away-session-why" : "away-all-why");
  button.disabled = true;
  try {
    const reply = await fetch("api/away", authed({
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(sessionId ? { on, session_id: sessionId } : { on }),
    }));
    if (reply.status === 401) {
      refused(reply);
      return;
    }
    const result = await reply.json().catch(() => ({}));
    if (result.away) {
      away = result.away;
      renderAway();
    }
    if (!reply.ok) why.textContent = result.message || result.detail || `The bridge answered ${reply.status}`;
  } catch (error) {
    why.textContent = "The bridge cannot be reached: try again.";
  } finally {
    button.disabled = false;
  }
}

// -- state and stream ------------------------------------------------------------------

async function load() {
  const reply = await fetch("api/state", authed());
  if (reply.status === 401) {
    refused(reply);
    return false;
  }
  if (!reply.ok) return false;
  const state = await reply.json();
  if (state.away) away = state.away;
  for (const s of state.sessions) newer(sessions, s);
  const inQueue = new Set(state.queue.map((c) => c.id));
  for (const [id, card] of cards) {
    if (isOpen(card) && !inQueue.has(id) && (card.rev || 0) <= state.rev) cards.delete(id); // closed meanwhile
  }
  const first = !loaded;
  for (const card of state.queue) {
    const known = cards.has(card.id);
    newer(cards, card);
    // a question that came while the stream was reconnecting still says so (not the ones
    // already waiting when the page opened: those it shows at once)
    if (!known && !first && isOpen(card)) notifyOf(card);
  }
  renderQueue();
  // on the first state: the asked-for session, else where work waits (not whichever session
  // the stream happened to mention first)
  loaded = true;
  const wanted = (first ? [fromHash(), firstShown(state)] : [fromHash(), current, firstShown(state)])
    .find((id) => id && sessions.has(id));
  await openSession(wanted || null);
  return true;
}

// the session a page opens on when none is asked for: the one whose question has waited
// longest, else the newest (never an empty "Pick a session" beside a list of them)
function firstShown(state) {
  if (state.queue.length) return [...state.queue].sort(byArrival)[0].session_id;
  const newest = [...sessions.values()].sort((a, b) => b.updated.localeCompare(a.updated))[0];
  return newest ? newest.id : null;
}

function changed(event, data) {
  if (event === "session") {
    newer(sessions, data);
    renderSessions();
    if (current === null && loaded && !signedOut) openSession(data.id); // the first session: shown at once
  } else if (event === "away") {
    away = data;
    renderAway();
  } else if (event === "item") {
    placeItem(data);
  } else if (event === "card") {
    const before = cards.get(data.id);
    newer(cards, data);
    if (!before && isOpen(data)) notifyOf(data);
    if (!isOpen(data)) forgetNote(data.id);
    if (before && isOpen(before) && !isOpen(data) && !answered.includes(data.id)) {
      answered.unshift(data.id);
      answered.length = Math.min(answered.length, ANSWERED_SHOWN);
    }
    renderQueue();
    placeCard(data);
  }
}

// the event stream, read with fetch (an EventSource cannot send the key)
async function readStream(body, gen) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done || gen !== generation) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      if (data.length && gen === generation) changed(event, JSON.parse(data.join("\n")));
    }
  }
}

async function connect(gen) {
  const status = document.getElementById("connection");
  let wait = 1000;
  while (gen === generation) {
    const abort = new AbortController();
    streaming = abort;
    let reply = null;
    try {
      reply = await fetch("api/stream", authed({ signal: abort.signal }));
    } catch (error) {
      reply = null; // the bridge cannot be reached (stopped, restarting)
    }
    if (gen !== generation) return;
    if (reply && reply.status === 401) {
      refused(reply);
      return;
    }
    if (reply && reply.ok && reply.body) {
      status.textContent = "Live";
      document.getElementById("sign-out").hidden = false;
      wait = 1000;
      load(); // the state now (again after a reconnect: what was missed)
      try {
        await readStream(reply.body, gen);
      } catch (error) {
        // the connection dropped: reconnect
      }
      if (gen !== generation) return;
    }
    status.textContent = "Reconnecting…";
    await new Promise((resolve) => setTimeout(resolve, wait));
    wait = Math.min(wait * 2, 8000);
  }
}

function restart() {
  generation++;
  if (streaming) streaming.abort();
  connect(generation);
}

window.addEventListener("hashchange", () => {
  const id = fromHash();
  // the focus moves to the session, the page stays where it is: the queue the link was
  // pressed in does not scroll away
  if (id) openSession(id).then(() => document.getElementById("session-view").focus({ preventScroll: true }));
});

async function start() {
  const given = takeKey();
  if (given && await works(given)) {
    key = given; // a sign-in just now: the other tabs take it too
    if (tabs) tabs.postMessage({ type: "signed-in", key });
  } else {
    key = sessionStorage.getItem(STORE);
  }
  if (!key) key = await askTabs();
  if (!key) {
    showSignedOut(
      "This tab has no sign-in of its own. Open the page while another tab of this browser is " +
      "signed in (it hands its sign-in over), or sign in again: open the one-time link the " +
      "bridge logs at start, or enter the bridge's token below.");
    return;
  }
  sessionStorage.setItem(STORE, key);
  restart();
}

if (!emojiShown()) document.documentElement.classList.add("no-emoji");
setInterval(refreshTimes, AGO_EVERY_MS);
document.getElementById("session-view").tabIndex = -1;
document.getElementById("sign-out").addEventListener("click", signOut);
document.getElementById("notify").addEventListener("click", toggleNotify);
document.getElementById("away-all").addEventListener("click", (event) => switchAway(event.currentTarget, null));
document.getElementById("away-session").addEventListener("click", (event) => switchAway(event.currentTarget, current));
showNotifyButton();
start();
