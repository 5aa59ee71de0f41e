// The Slack sandbox page: shows the workspace as one person sees it and acts as them.
//
// State comes from GET /sandbox/state; a Server-Sent Events stream (/sandbox/events) says
// when it changed. Block Kit is built with DOM calls (text via textContent); the only HTML
// inserted is the server's `html` rendering of Slack text (adapters/slack/sandbox/richtext.py),
// which escapes everything it does not build itself.
"use strict";

(function () {
  const S = {
    me: null, // user id
    data: null, // last state
    channel: null, // channel id shown
    openThreads: new Set(),
    mainSigs: new Map(), // message key -> signature of its content
    threadSigs: new Map(), // message key -> signature of its thread
    viewKey: null,
    localErrors: {},
    demoSig: null,
    seen: null, // channel id -> newest ts seen
    refreshTimer: null,
    refreshing: false,
    again: false,
    queue: Promise.resolve(),
    uid: 0,
    lastChannel: null,
  };

  // ---- small helpers -------------------------------------------------------------------

  function $(selector, root) {
    return (root || document).querySelector(selector);
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key === "html") {
        node.innerHTML = value; // server-rendered, already safe
        localDates(node);
      }
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function html(tag, cls, trusted, attrs) {
    return el(tag, Object.assign({ class: cls, html: trusted || "" }, attrs || {}));
  }

  function textHtml(obj) {
    return obj && typeof obj.html === "string" ? obj.html : "";
  }

  function fmtTime(ts) {
    const date = new Date(parseFloat(ts) * 1000);
    return date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  // Slack's <!date^…> tokens in the reader's own time zone, as Slack's clients show them
  // (the server's text, in UTC, is only the fallback).
  function localDate(seconds, format) {
    const d = new Date(seconds * 1000);
    const day = (options) => d.toLocaleDateString([], options);
    const pretty = (otherwise) => {
      const midnight = (date) => new Date(date.getFullYear(), date.getMonth(), date.getDate());
      const days = Math.round((midnight(d) - midnight(new Date())) / 86400000);
      return { "-1": "Yesterday", 0: "Today", 1: "Tomorrow" }[days] || otherwise;
    };
    const pad = (n) => String(n).padStart(2, "0");
    const tokens = {
      date_num: () => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`,
      date: () => day({ year: "numeric", month: "long", day: "numeric" }),
      date_short: () => day({ year: "numeric", month: "short", day: "numeric" }),
      date_long: () => day({ weekday: "long", year: "numeric", month: "long", day: "numeric" }),
      time: () => d.toLocaleTimeString([], { hour: "numeric", minute: "2-digit" }),
      time_secs: () => d.toLocaleTimeString([], { hour: "numeric", minute: "2-digit", second: "2-digit" }),
    };
    tokens.date_pretty = () => pretty(tokens.date());
    tokens.date_short_pretty = () => pretty(tokens.date_short());
    tokens.date_long_pretty = () => pretty(tokens.date_long());
    return format.replace(/\{(\w+)\}/g, (all, name) => (tokens[name] ? tokens[name]() : all));
  }

  function localDates(root) {
    for (const node of root.querySelectorAll("time[data-date]")) {
      const seconds = Number(node.dataset.date);
      if (!Number.isFinite(seconds) || !node.dataset.format) continue;
      node.title = node.textContent; // the fallback, on hover
      node.textContent = localDate(seconds, node.dataset.format);
    }
  }

  function uid(prefix) {
    S.uid += 1;
    return `${prefix}-${S.uid}`;
  }

  function toast(message, kind) {
    const box = el("div", { class: `toast ${kind || "error"}`, "data-testid": "toast", role: "status" }, message);
    $("#toasts").append(box);
    setTimeout(() => box.remove(), 6000);
  }

  async function api(path, body) {
    try {
      const response = await fetch(path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body || {}),
      });
      const data = await response.json().catch(() => ({}));
      if (!("ok" in data)) data.ok = response.ok;
      return data;
    } catch (error) {
      return { ok: false, error: "network", detail: String(error) };
    }
  }

  function describe(result) {
    const detail = result.detail ? `: ${result.detail}` : "";
    return `${result.error || "error"}${detail}`;
  }

  function person(id) {
    const people = (S.data && S.data.people) || [];
    return people.find((p) => p.id === id);
  }

  // ---- state and live updates ----------------------------------------------------------

  function scheduleRefresh(delay) {
    if (S.refreshTimer !== null) return;
    S.refreshTimer = setTimeout(() => {
      S.refreshTimer = null;
      refresh();
    }, delay === undefined ? 25 : delay);
  }

  async function refresh() {
    if (S.refreshing) {
      S.again = true;
      return;
    }
    S.refreshing = true;
    try {
      for (;;) {
        S.again = false;
        const asked = S.me;
        let response = await fetch(`/sandbox/state?user=${encodeURIComponent(asked || "")}`, {
          cache: "no-store",
        });
        if (response.status === 404 && asked) {
          S.me = null; // a stale saved person: fall back to the first one
          response = await fetch("/sandbox/state", { cache: "no-store" });
        }
        if (!response.ok) throw new Error(`state: HTTP ${response.status}`);
        const data = await response.json();
        if (S.me !== asked && S.me !== null) continue; // switched person meanwhile
        S.data = data;
        S.me = data.me;
        render();
        if (!S.again) break;
      }
    } catch (error) {
      setConnection("offline", "offline");
      setTimeout(() => scheduleRefresh(), 1000);
    } finally {
      S.refreshing = false;
    }
  }

  function setConnection(state, label) {
    const conn = $("#conn");
    conn.dataset.state = state;
    conn.textContent = label;
  }

  function connect() {
    const source = new EventSource("/sandbox/events");
    source.onopen = () => {
      setConnection("live", "live");
      scheduleRefresh(0);
    };
    source.onmessage = () => scheduleRefresh();
    source.onerror = () => setConnection("reconnecting", "reconnecting…");
  }

  // ---- rendering: the frame ------------------------------------------------------------

  function render() {
    const d = S.data;
    if (!S.loaded) {
      S.loaded = true;
      // A modal left open by an earlier page (before a reload) closes, as a Slack client
      // restart closes it; it does not come back on every reload.
      if (d.view) {
        api("/sandbox/close", { user: d.me, view_id: d.view.id }).then(() => scheduleRefresh(0));
        d.view = null;
      }
    }
    renderSwitcher(d);
    renderChannels(d);
    renderMessages(d);
    renderHome(d);
    renderView(d);
    renderDemo(d);
    const me = person(d.me);
    document.body.dataset.user = me ? me.name : d.me;
    document.body.dataset.channel = S.channel || "";
    document.body.dataset.ready = "true";
  }

  // ---- rendering: the app's Home tab ---------------------------------------------------

  function openHome() {
    S.showHome = true;
    S.homeFor = S.me;
    render();
    api("/sandbox/home", { user: S.me }).then((result) => {
      if (!result.ok) toast(`The app did not open its Home tab (${describe(result)}).`);
    });
  }

  function renderHome(d) {
    const home = $("#home");
    const showing = Boolean(S.showHome);
    home.hidden = !showing;
    $("#messages").hidden = showing;
    $("#composer").hidden = showing;
    $("#home-tab").classList.toggle("current", showing);
    if (!showing) return;
    if (S.homeFor !== d.me) return openHome(); // switched person: their own Home tab
    $("#channel-title").textContent = "agent-questions · Home";
    $("#channel-sub").textContent = "";
    const sig = JSON.stringify(d.home);
    if (S.homeSig === sig) return;
    S.homeSig = sig;
    const ctx = { kind: "home", root: home };
    home.replaceChildren(
      d.home
        ? el("div", { class: "home-body" }, renderBlocks(d.home.blocks || [], ctx))
        : el("div", { class: "empty" }, el("p", {}, "Opening the Home tab…"))
    );
  }

  function renderSwitcher(d) {
    const select = $("#user-switcher");
    const wanted = d.people.map((p) => `${p.id}:${p.name}`).join(",");
    if (select.dataset.people !== wanted) {
      select.replaceChildren(
        ...d.people.map((p) => el("option", { value: p.id, "data-name": p.name }, `${p.name} (${p.real_name})`))
      );
      select.dataset.people = wanted;
    }
    select.value = d.me;
  }

  function switchUser(id) {
    if (id === S.me) return;
    const left = S.data && S.data.me === S.me ? S.data.view : null;
    if (left) {
      // The person left closes their modal, as leaving a Slack client does: it never comes
      // back when someone switches to them again.
      api("/sandbox/close", { user: S.me, view_id: left.id });
    }
    S.me = id;
    const p = person(id);
    try {
      localStorage.setItem("sandbox-user", id);
    } catch (error) {
      /* private mode */
    }
    const url = new URL(window.location.href);
    url.searchParams.set("as", p ? p.name : id);
    history.replaceState(null, "", url);
    resetMessages();
    S.seen = null;
    S.viewKey = null;
    $("#overlay").replaceChildren();
    refresh();
  }

  function resetMessages() {
    $("#messages").replaceChildren();
    S.mainSigs.clear();
    S.threadSigs.clear();
  }

  function renderChannels(d) {
    const ids = d.channels.map((c) => c.id);
    if (!S.channel || !ids.includes(S.channel)) {
      S.channel = d.default_channel || ids[0] || null;
    }
    const newest = {};
    const unread = {};
    for (const m of d.messages) {
      if (!newest[m.channel] || parseFloat(m.ts) > parseFloat(newest[m.channel])) newest[m.channel] = m.ts;
    }
    if (S.seen === null) S.seen = Object.assign({}, newest);
    if (S.channel && newest[S.channel]) S.seen[S.channel] = newest[S.channel];
    for (const m of d.messages) {
      const seen = S.seen[m.channel];
      if (m.author.id !== d.me && (!seen || parseFloat(m.ts) > parseFloat(seen))) {
        unread[m.channel] = (unread[m.channel] || 0) + 1;
      }
    }
    const item = (c) =>
      el(
        "button",
        {
          type: "button",
          class: `chan${c.id === S.channel && !S.showHome ? " current" : ""}${unread[c.id] ? " unread" : ""}`,
          "data-testid": "channel",
          "data-channel-id": c.id,
          "aria-current": c.id === S.channel ? "true" : null,
          onclick: () => {
            S.channel = c.id;
            S.showHome = false;
            render();
          },
        },
        el("span", { class: "chan-icon", "aria-hidden": "true" }, c.kind === "channel" ? "#" : "●"),
        el("span", { class: "chan-name" }, c.label),
        unread[c.id] ? el("span", { class: "chan-badge", "data-testid": "unread" }, String(unread[c.id])) : null
      );
    $("#channel-list").replaceChildren(...d.channels.filter((c) => c.kind === "channel").map(item));
    const dms = d.channels.filter((c) => c.kind !== "channel");
    $("#dm-list").replaceChildren(
      ...(dms.length ? dms.map(item) : [el("div", { class: "side-empty" }, "none yet")])
    );
    const current = d.channels.find((c) => c.id === S.channel);
    $("#channel-title").textContent = current
      ? current.kind === "channel"
        ? `# ${current.label}`
        : current.label
      : "No channel";
    $("#channel-sub").textContent = current && current.kind !== "channel" ? "direct message with the app" : "";
    $("#composer-text").placeholder = current
      ? `Message ${current.kind === "channel" ? "#" : ""}${current.label}`
      : "";
  }

  // ---- rendering: messages -------------------------------------------------------------

  function keyOf(m) {
    return `${m.channel}:${m.ts}:${m.ephemeral ? "e" : "m"}`;
  }

  function isTop(m) {
    return !m.thread_ts || m.thread_ts === m.ts;
  }

  function renderMessages(d) {
    const list = $("#messages");
    if (S.lastChannel !== S.channel) {
      resetMessages();
    }
    const channelChanged = S.lastChannel !== S.channel;
    S.lastChannel = S.channel;
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 60;
    const mine = d.messages.filter((m) => m.channel === S.channel);
    const replies = new Map();
    for (const m of mine) {
      if (isTop(m)) continue;
      if (!replies.has(m.thread_ts)) replies.set(m.thread_ts, []);
      replies.get(m.thread_ts).push(m);
    }
    const top = mine.filter(isTop);
    const existing = new Map();
    for (const node of Array.from(list.children)) existing.set(node.dataset.key, node);
    const keep = new Set();
    let previous = null;
    const place = (node) => {
      const wanted = previous ? previous.nextSibling : list.firstChild;
      if (wanted !== node) list.insertBefore(node, wanted);
      previous = node;
    };
    if (!top.length) {
      let empty = existing.get("empty");
      if (!empty) {
        empty = el(
          "div",
          { class: "empty", "data-key": "empty" },
          el("p", {}, "No messages here yet."),
          el("p", {}, "Press “Run the demo” (or type /demo) and a sample agent will ask its questions here.")
        );
      }
      keep.add("empty");
      place(empty);
    }
    for (const m of top) {
      const key = keyOf(m);
      let node = existing.get(key);
      const sig = JSON.stringify(m);
      if (!node || S.mainSigs.get(key) !== sig) {
        const fresh = renderMessage(m);
        if (node) {
          node.replaceWith(fresh);
          fresh.classList.add("updated");
        }
        node = fresh;
        S.mainSigs.set(key, sig);
        S.threadSigs.delete(key);
      }
      renderThread(node, m, replies.get(m.ts) || []);
      keep.add(key);
      place(node);
    }
    for (const [key, node] of existing) {
      if (!keep.has(key)) {
        node.remove();
        S.mainSigs.delete(key);
        S.threadSigs.delete(key);
      }
    }
    if (atBottom || channelChanged) list.scrollTop = list.scrollHeight;
    if (channelChanged && top.length && getComputedStyle(list).overflowY === "visible") {
      // On a phone the page scrolls, not the list: open at the newest message.
      list.lastElementChild.scrollIntoView({ block: "end" });
    }
  }

  function renderThread(node, m, replies) {
    const key = keyOf(m);
    const open = S.openThreads.has(key);
    const sig = JSON.stringify([replies, open]);
    if (S.threadSigs.get(key) === sig) return;
    S.threadSigs.set(key, sig);
    const holder = $(".thread", node);
    if (!replies.length) {
      holder.replaceChildren();
      return;
    }
    const count = replies.length;
    const toggle = el(
      "button",
      {
        type: "button",
        class: "thread-toggle",
        "data-testid": "thread-toggle",
        "aria-expanded": open ? "true" : "false",
        onclick: () => {
          if (S.openThreads.has(key)) S.openThreads.delete(key);
          else S.openThreads.add(key);
          renderThread(node, m, replies);
        },
      },
      open ? "Hide replies" : `${count} ${count === 1 ? "reply" : "replies"}`
    );
    const list = el("div", { class: "replies", "data-testid": "replies", hidden: !open });
    if (open) list.append(...replies.map((r) => renderMessage(r, true)));
    holder.replaceChildren(toggle, list);
  }

  function renderMessage(m, isReply) {
    const key = keyOf(m);
    const node = el("div", {
      class: `msg${m.ephemeral ? " ephemeral" : ""}${isReply ? " reply" : ""}`,
      "data-testid": isReply ? "reply" : "message",
      "data-key": key,
      "data-ts": m.ts,
      "data-channel": m.channel,
      "data-ephemeral": m.ephemeral ? "true" : "false",
      "data-author": m.author.name,
    });
    const initial = (m.author.name || "?").slice(0, 1).toUpperCase();
    const main = el("div", { class: "msg-main" });
    const ctx = { kind: "message", channel: m.channel, ts: m.ts, root: main, uid: uid("m") };
    const meta = el(
      "div",
      { class: "msg-meta" },
      el("span", { class: "msg-author" }, m.author.name),
      m.author.is_bot ? el("span", { class: "app-badge" }, "APP") : null,
      el("time", { class: "msg-time", datetime: new Date(parseFloat(m.ts) * 1000).toISOString() }, fmtTime(m.ts)),
      m.edited ? el("span", { class: "msg-edited" }, "(edited)") : null
    );
    if (m.ephemeral) {
      main.append(el("div", { class: "only-you", "data-testid": "only-you" }, "Only visible to you"));
    }
    if (m.blocks && m.blocks.length) {
      main.append(renderBlocks(m.blocks, ctx));
    } else {
      main.append(html("div", "msg-text", m.text_html));
    }
    for (const file of m.files || []) {
      main.append(el("div", { class: "msg-file" }, "📄 ", file.title || file.name));
    }
    node.append(
      el("div", { class: `avatar${m.author.is_bot ? " bot" : ""}`, "aria-hidden": "true" }, initial),
      el("div", { class: "msg-body" }, meta, main, isReply ? null : el("div", { class: "thread" }))
    );
    return node;
  }

  // ---- rendering: Block Kit ------------------------------------------------------------

  function renderBlocks(blocks, ctx) {
    return el("div", { class: "blocks" }, blocks.map((b) => renderBlock(b, ctx)));
  }

  function blockAttrs(block, cls) {
    return { class: cls, "data-block-id": block.block_id || null, "data-block-type": block.type };
  }

  function renderBlock(block, ctx) {
    switch (block.type) {
      case "section": {
        const node = el("div", blockAttrs(block, "sk-section"));
        const body = el("div", { class: "sk-section-body" });
        if (block.text) body.append(html("div", "sk-text", textHtml(block.text)));
        if (Array.isArray(block.fields) && block.fields.length) {
          body.append(el("div", { class: "sk-fields" }, block.fields.map((f) => html("div", "sk-field", textHtml(f)))));
        }
        node.append(body);
        if (block.accessory) node.append(el("div", { class: "sk-accessory" }, renderElement(block.accessory, block, ctx)));
        return node;
      }
      case "header":
        return el("div", blockAttrs(block, "sk-header-block"), html("h3", "sk-header", textHtml(block.text)));
      case "context":
        return el(
          "div",
          blockAttrs(block, "sk-context"),
          (block.elements || []).map((e) =>
            e.type === "image"
              ? el("span", { class: "sk-img-alt", title: e.alt_text || "" }, "🖼")
              : html("span", "sk-context-item", textHtml(e))
          )
        );
      case "divider":
        return el("hr", blockAttrs(block, "sk-divider"));
      case "markdown":
        return html("div", "sk-markdown", block.html, { "data-block-type": "markdown" });
      case "rich_text":
        return html("div", "sk-rich", block.html || "", { "data-block-type": "rich_text" });
      case "actions":
        return el("div", blockAttrs(block, "sk-actions"), (block.elements || []).map((e) => renderElement(e, block, ctx)));
      case "input":
        return renderInput(block, ctx);
      case "image":
        return el(
          "figure",
          blockAttrs(block, "sk-image"),
          block.title ? html("figcaption", "sk-image-title", textHtml(block.title)) : null,
          el("div", { class: "sk-image-box" }, `🖼 ${block.alt_text || "image"}`)
        );
      default:
        return el("div", blockAttrs(block, "sk-unsupported"), `(a ${block.type} block: not shown in the sandbox)`);
    }
  }

  function renderInput(block, ctx) {
    const element = renderElement(block.element || {}, block, ctx);
    const target = element.matches("input, textarea, select")
      ? element
      : element.querySelector("input, textarea, select");
    if (target && !target.id) target.id = uid("in");
    const label = el(
      "label",
      { class: "sk-label", for: target ? target.id : null },
      html("span", "", textHtml(block.label)),
      block.optional ? el("span", { class: "sk-optional" }, " (optional)") : null
    );
    const error = el("div", {
      class: "sk-input-error",
      "data-error-for": block.block_id || "",
      "data-testid": "input-error",
      role: "alert",
    });
    const hint = block.hint ? html("div", "sk-hint", textHtml(block.hint)) : null;
    const node = el("div", blockAttrs(block, "sk-input-block"), label, element, hint, error);
    if (!block.optional) node.dataset.required = "true";
    return node;
  }

  function elementAttrs(element, block, cls, stateful) {
    return {
      class: cls,
      "data-action-id": element.action_id || "",
      "data-block-id": block.block_id || "",
      "data-type": element.type,
      "data-stateful": stateful ? "true" : null,
    };
  }

  function dispatches(block, element, ctx) {
    if (ctx.kind === "home") return true;
    if (ctx.kind !== "message") return false;
    return block.type !== "input" || Boolean(block.dispatch_action);
  }

  function optionsOf(element) {
    const all = [];
    for (const o of element.options || []) all.push(o);
    for (const g of element.option_groups || []) for (const o of g.options || []) all.push(o);
    return all;
  }

  function renderElement(element, block, ctx) {
    switch (element.type) {
      case "button":
        return renderButton(element, block, ctx);
      case "static_select":
      case "overflow":
        return renderSelect(element, block, ctx);
      case "multi_static_select":
        return renderMultiSelect(element, block, ctx);
      case "checkboxes":
      case "radio_buttons":
        return renderChoices(element, block, ctx);
      case "plain_text_input":
        return renderTextInput(element, block);
      case "image":
        return el("span", { class: "sk-img-alt", title: element.alt_text || "" }, "🖼");
      default:
        return el("span", { class: "sk-unsupported" }, `(${element.type || "unknown"} element)`);
    }
  }

  function renderButton(element, block, ctx) {
    const style = element.style === "primary" || element.style === "danger" ? ` ${element.style}` : "";
    const button = el(
      "button",
      Object.assign(elementAttrs(element, block, `sk-btn${style}`, false), {
        type: "button",
        "data-value": element.value || null,
        "data-has-confirm": element.confirm ? "true" : null,
      }),
      html("span", "sk-btn-text", textHtml(element.text))
    );
    button.addEventListener("click", async () => {
      if (element.confirm && !(await confirmDialog(element.confirm))) return;
      if (element.url) window.open(element.url, "_blank", "noopener,noreferrer");
      dispatch(ctx, block, element, button);
    });
    return button;
  }

  function optionNode(o, selectedValue) {
    const label = o.text && typeof o.text.text === "string" ? o.text.text : String(o.value);
    return el("option", { value: o.value, selected: selectedValue === o.value }, label);
  }

  function renderSelect(element, block, ctx) {
    const overflow = element.type === "overflow";
    const restored = overflow ? undefined : savedSelection(ctx, block, element);
    const initial = restored !== undefined ? restored : element.initial_option ? element.initial_option.value : null;
    const select = el(
      "select",
      Object.assign(elementAttrs(element, block, overflow ? "sk-select sk-overflow" : "sk-select", !overflow), {
        "aria-label": overflow ? "More actions" : (element.placeholder && element.placeholder.text) || "Choose",
      })
    );
    const placeholder = overflow ? "⋯" : (element.placeholder && element.placeholder.text) || "Select an option";
    select.append(el("option", { value: "", disabled: true, selected: initial === null }, placeholder));
    for (const o of element.options || []) select.append(optionNode(o, initial));
    for (const g of element.option_groups || []) {
      const label = g.label && typeof g.label.text === "string" ? g.label.text : "";
      select.append(el("optgroup", { label }, (g.options || []).map((o) => optionNode(o, initial))));
    }
    select.addEventListener("change", async () => {
      if (!dispatches(block, element, ctx)) return;
      if (element.confirm && !(await confirmDialog(element.confirm))) return;
      await dispatch(ctx, block, element, select);
      if (overflow) select.value = "";
    });
    return overflow || optionsOf(element).length <= FILTER_FROM ? select : filtered(select);
  }

  const FILTER_FROM = 5; // a menu with more options than a row of buttons gets a filter box

  // Slack's menus filter their options as you type; Enter picks the first one shown.
  function filtered(select) {
    const search = el("input", {
      type: "search",
      class: "sk-select-filter",
      placeholder: "Type to filter the options…",
      "aria-label": "Filter the options",
      "data-testid": "select-filter",
      enterkeyhint: "done",
    });
    const options = Array.from(select.querySelectorAll("option")).filter((o) => !o.disabled);
    const shown = () => options.filter((o) => !o.hidden);
    search.addEventListener("input", () => {
      const wanted = search.value.trim().toLowerCase();
      for (const o of options) o.hidden = Boolean(wanted) && !o.textContent.toLowerCase().includes(wanted);
      for (const group of select.querySelectorAll("optgroup")) {
        group.hidden = Array.from(group.children).every((o) => o.hidden);
      }
      search.classList.toggle("no-match", !shown().length);
    });
    search.addEventListener("keydown", (event) => {
      if (event.key !== "Enter") return;
      event.preventDefault();
      const first = shown()[0];
      if (!first || select.value === first.value) return;
      select.value = first.value;
      select.dispatchEvent(new Event("change"));
    });
    return el("div", { class: "sk-select-filtered" }, search, select);
  }

  // A long multi-select menu filters as you type, as Slack's does (ticks are kept).
  function multiFilter(menu) {
    const search = el("input", {
      type: "search",
      class: "sk-select-filter",
      placeholder: "Type to filter the options…",
      "aria-label": "Filter the options",
      "data-testid": "select-filter",
    });
    search.addEventListener("input", () => {
      const wanted = search.value.trim().toLowerCase();
      const rows = Array.from(menu.querySelectorAll(".sk-multi-option"));
      for (const row of rows) row.hidden = !row.textContent.toLowerCase().includes(wanted);
      for (const group of menu.querySelectorAll(".sk-multi-group")) {
        group.hidden = !group.querySelector(".sk-multi-option:not([hidden])");
      }
      search.classList.toggle("no-match", rows.every((row) => row.hidden));
    });
    return search;
  }

  function renderMultiSelect(element, block, ctx) {
    const restored = savedSelection(ctx, block, element);
    const chosen = new Set(
      restored !== undefined ? restored || [] : (element.initial_options || []).map((o) => o.value)
    );
    const holder = el("div", elementAttrs(element, block, "sk-multi", true));
    const summary = el("summary", { class: "sk-multi-summary", "data-testid": "multi-summary" });
    const menu = el("div", { class: "sk-multi-menu", role: "listbox", "aria-multiselectable": "true" });
    const placeholder = (element.placeholder && element.placeholder.text) || "Select options";
    const paint = () => {
      const picked = optionsOf(element).filter((o) => chosen.has(o.value));
      summary.replaceChildren(
        ...(picked.length
          ? picked.map((o) => el("span", { class: "chip" }, o.text ? o.text.text : o.value))
          : [el("span", { class: "sk-placeholder" }, placeholder)])
      );
    };
    const addOption = (parent, o) => {
      const box = el("input", { type: "checkbox", value: o.value, checked: chosen.has(o.value) });
      box.addEventListener("change", () => {
        if (box.checked) chosen.add(o.value);
        else chosen.delete(o.value);
        paint();
        if (dispatches(block, element, ctx)) dispatch(ctx, block, element, holder);
      });
      parent.append(el("label", { class: "sk-multi-option", role: "option" }, box, html("span", "", textHtml(o.text))));
    };
    for (const o of element.options || []) addOption(menu, o);
    for (const g of element.option_groups || []) {
      const group = el("div", { class: "sk-multi-group" }, html("div", "sk-multi-group-label", textHtml(g.label)));
      for (const o of g.options || []) addOption(group, o);
      menu.append(group);
    }
    paint();
    if (optionsOf(element).length > FILTER_FROM) menu.prepend(multiFilter(menu));
    const details = el("details", { class: "sk-multi-details" }, summary, menu);
    // An opened menu is scrolled into view rather than clipped by the message list.
    details.addEventListener("toggle", () => {
      if (details.open) menu.scrollIntoView({ block: "nearest" });
    });
    holder.append(details);
    return holder;
  }

  function renderChoices(element, block, ctx) {
    const multi = element.type === "checkboxes";
    const holder = el("div", Object.assign(elementAttrs(element, block, `sk-choices ${multi ? "sk-checkboxes" : "sk-radios"}`, true), {
      role: multi ? "group" : "radiogroup",
    }));
    const restored = savedSelection(ctx, block, element);
    const initial = new Set(
      restored !== undefined
        ? [].concat(restored || [])
        : multi
          ? (element.initial_options || []).map((o) => o.value)
          : element.initial_option
            ? [element.initial_option.value]
            : []
    );
    const name = uid("choice");
    for (const o of element.options || []) {
      const input = el("input", {
        type: multi ? "checkbox" : "radio",
        name,
        value: o.value,
        checked: initial.has(o.value),
      });
      input.addEventListener("change", () => {
        if (dispatches(block, element, ctx)) dispatch(ctx, block, element, holder);
      });
      holder.append(
        el(
          "label",
          { class: "sk-choice", "data-value": o.value },
          input,
          el(
            "span",
            { class: "sk-choice-body" },
            html("span", "sk-choice-text", textHtml(o.text)),
            o.description ? html("span", "sk-choice-desc", textHtml(o.description)) : null
          )
        )
      );
    }
    return holder;
  }

  function renderTextInput(element, block) {
    const attrs = Object.assign(elementAttrs(element, block, "sk-input", true), {
      placeholder: element.placeholder ? element.placeholder.text : null,
      maxlength: element.max_length || null,
      minlength: element.min_length || null,
    });
    const input = element.multiline ? el("textarea", Object.assign(attrs, { rows: 4 })) : el("input", Object.assign(attrs, { type: "text" }));
    if (typeof element.initial_value === "string") input.value = element.initial_value;
    return input;
  }

  function readValue(node) {
    switch (node.dataset.type) {
      case "static_select":
      case "overflow":
        return node.value || null;
      case "multi_static_select":
      case "checkboxes":
        return Array.from(node.querySelectorAll("input[type=checkbox]:checked")).map((i) => i.value);
      case "radio_buttons": {
        const checked = node.querySelector("input:checked");
        return checked ? checked.value : null;
      }
      case "plain_text_input":
        return node.value === "" ? null : node.value;
      default:
        return null;
    }
  }

  function collectValues(root) {
    return Array.from(root.querySelectorAll("[data-stateful]")).map((node) => [
      node.dataset.blockId,
      node.dataset.actionId,
      readValue(node),
    ]);
  }

  // The person's unsent choices in a message (ticks, picks) survive a reload of the page:
  // kept per person and message revision (a message the app redraws starts afresh).
  function savedKey(ctx) {
    return `sandbox-choices:${S.me}:${ctx.channel}:${ctx.ts}`;
  }

  function savedSelection(ctx, block, element) {
    if (ctx.kind !== "message") return undefined;
    try {
      const all = JSON.parse(sessionStorage.getItem(savedKey(ctx)) || "[]");
      const hit = all.find(([b, a]) => b === block.block_id && a === element.action_id);
      return hit ? hit[2] : undefined;
    } catch (error) {
      return undefined;
    }
  }

  function saveSelections(ctx) {
    if (ctx.kind !== "message") return;
    try {
      sessionStorage.setItem(savedKey(ctx), JSON.stringify(collectValues(ctx.root)));
    } catch (error) {
      /* private mode */
    }
  }

  function dispatch(ctx, block, element, node) {
    node.classList.add("busy");
    saveSelections(ctx);
    const values = collectValues(ctx.root);
    if (element.type === "overflow") values.push([block.block_id, element.action_id, readValue(node)]);
    const body =
      ctx.kind === "home" || ctx.kind === "view"
        ? { user: S.me, home: ctx.kind === "home", view_id: ctx.viewId, block_id: block.block_id, action_id: element.action_id }
        : {
            user: S.me,
            channel: ctx.channel,
            ts: ctx.ts,
            block_id: block.block_id,
            action_id: element.action_id,
            values,
          };
    // One interaction at a time, in order, as a Slack client sends them.
    const job = S.queue.then(async () => {
      const result = await api("/sandbox/action", body);
      if (result.error === "element_not_found") {
        // This page showed an older version of the message: show it as it is now.
        toast("That message has changed since this page showed it; here it is as it is now.", "info");
        scheduleRefresh(0);
      } else if (!result.ok) toast(`The click did not go through (${describe(result)}).`);
      else scheduleRefresh(0); // its effects (an update, a note) show even without live events
    });
    S.queue = job.catch(() => {});
    return job.finally(() => node.classList.remove("busy"));
  }

  // ---- the confirm dialog --------------------------------------------------------------

  function confirmDialog(confirm) {
    return new Promise((resolve) => {
      const overlay = $("#confirm-overlay");
      const done = (ok) => {
        overlay.hidden = true;
        overlay.replaceChildren();
        document.removeEventListener("keydown", onKey);
        resolve(ok);
      };
      const onKey = (event) => {
        if (event.key === "Escape") done(false);
      };
      const style = confirm.style === "danger" ? " danger" : " primary";
      const box = el(
        "div",
        { class: "confirm", role: "alertdialog", "aria-modal": "true", "data-testid": "confirm" },
        html("h3", "confirm-title", textHtml(confirm.title) || "Are you sure?"),
        html("div", "confirm-text", textHtml(confirm.text)),
        el(
          "div",
          { class: "confirm-buttons" },
          el("button", { type: "button", class: "sk-btn", "data-testid": "confirm-deny", onclick: () => done(false) },
            html("span", "", textHtml(confirm.deny) || "Cancel")),
          el("button", { type: "button", class: `sk-btn${style}`, "data-testid": "confirm-ok", onclick: () => done(true) },
            html("span", "", textHtml(confirm.confirm) || "Yes"))
        )
      );
      overlay.replaceChildren(box);
      overlay.hidden = false;
      document.addEventListener("keydown", onKey);
      $("[data-testid=confirm-ok]", box).focus();
    });
  }

  // ---- the modal -----------------------------------------------------------------------

  function renderView(d) {
    const overlay = $("#overlay");
    const view = d.view;
    if (!view) {
      if (S.viewKey !== null || !overlay.hidden) {
        overlay.hidden = true;
        overlay.replaceChildren();
        document.body.classList.remove("modal-open");
      }
      S.viewKey = null;
      return;
    }
    const key = `${view.id}|${view.hash}`;
    if (S.viewKey !== key) {
      S.viewKey = key;
      S.localErrors = {};
      overlay.replaceChildren(buildModal(view));
      overlay.hidden = false;
      document.body.classList.add("modal-open");
      const first = $(".modal-body input, .modal-body textarea, .modal-body select", overlay);
      if (first) first.focus();
    }
    applyErrors(view.errors || {});
  }

  function applyErrors(errors) {
    for (const slot of document.querySelectorAll("#overlay [data-error-for]")) {
      const blockId = slot.dataset.errorFor;
      const message = errors[blockId] || S.localErrors[blockId] || "";
      slot.textContent = message;
      slot.closest(".sk-input-block").classList.toggle("has-error", Boolean(message));
    }
  }

  function buildModal(view) {
    const formId = uid("view-form");
    const form = el("form", { class: "modal-body", id: formId, novalidate: true });
    const ctx = { kind: "view", viewId: view.id, root: form, uid: uid("v") };
    form.append(renderBlocks(view.blocks || [], ctx));
    const submit = view.submit_html
      ? el("button", { type: "submit", form: formId, class: "sk-btn primary", "data-testid": "modal-submit" }, html("span", "", view.submit_html))
      : null;
    const close = el("button", { type: "button", class: "sk-btn", "data-testid": "modal-close" }, html("span", "", view.close_html));
    const x = el("button", { type: "button", class: "modal-x", "aria-label": "Close", "data-testid": "modal-x" }, "×");
    const modal = el(
      "div",
      { class: "modal", role: "dialog", "aria-modal": "true", "data-testid": "modal", "data-view-id": view.id },
      el("div", { class: "modal-head" }, html("h2", "modal-title", view.title_html), x),
      form,
      el("div", { class: "modal-foot" }, close, submit)
    );
    const closeIt = async () => {
      const result = await api("/sandbox/close", { user: S.me, view_id: view.id });
      if (!result.ok) toast(`Could not close the modal (${describe(result)}).`);
    };
    close.addEventListener("click", closeIt);
    x.addEventListener("click", closeIt);
    modal.addEventListener("keydown", (event) => {
      if (event.key === "Escape") closeIt();
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!submit) return;
      S.localErrors = {};
      for (const block of form.querySelectorAll(".sk-input-block[data-required]")) {
        const field = block.querySelector("[data-stateful]");
        const value = field ? readValue(field) : null;
        if (value === null || (Array.isArray(value) && !value.length)) {
          S.localErrors[block.dataset.blockId] = "Please complete this required field.";
        }
      }
      if (Object.keys(S.localErrors).length) {
        applyErrors({});
        return;
      }
      submit.disabled = true;
      const result = await api("/sandbox/submit", { user: S.me, view_id: view.id, values: collectValues(form) });
      submit.disabled = false;
      if (result.errors) applyErrors(result.errors);
      else if (!result.ok) toast(`The app did not take the submission (${describe(result)}).`);
    });
    return modal;
  }

  // ---- the demo panel ------------------------------------------------------------------

  function answerNodes(answer) {
    const items = (answer && answer.answers) || [];
    return items.map((item) => {
      const pieces = (item.selected || []).map((label) => el("span", { class: "chip", "data-testid": "demo-selected" }, label));
      if (typeof item.custom === "string" && item.custom !== "") {
        pieces.push(el("span", { class: "chip custom", "data-testid": "demo-custom" }, `“${item.custom}”`));
      }
      if (!pieces.length) pieces.push(el("span", { class: "skipped" }, "skipped"));
      return el("div", { class: "demo-answer", "data-testid": "demo-answer" }, pieces);
    });
  }

  const DECISIONS = { "allowed-once": "Allowed once", rejected: "Rejected" };

  function decisionNode(step) {
    if (step.kind !== "approval") return null;
    const command = step.command ? el("div", { class: "step-command" }, el("code", {}, step.command)) : null;
    if (!step.decision) return command;
    const chip = el(
      "span",
      { class: `chip decision ${step.decision}`, "data-testid": "demo-decision", "data-decision": step.decision },
      DECISIONS[step.decision] || step.decision
    );
    return [command, el("div", { class: "demo-answer" }, chip)];
  }

  const STEP_LABELS = {
    pending: "not asked yet",
    waiting: "waiting for an answer",
    answered: "answered",
    failed: "failed",
  };

  function renderDemo(d) {
    const demo = d.demo || { available: false, runs: [] };
    const sig = JSON.stringify(demo);
    if (S.demoSig === sig) return;
    S.demoSig = sig;
    const start = $("#demo-start");
    start.disabled = !demo.available;
    start.textContent = demo.runs && demo.runs.length ? "Run the demo again" : "Run the demo";
    if (!demo.available) {
      $("#demo-intro").textContent = "The demo agent needs the bot: start the sandbox with `python -m bot`.";
    }
    $("#demo-runs").replaceChildren(
      ...(demo.runs || []).map((run) =>
        el(
          "section",
          { class: "demo-run", "data-testid": "demo-run", "data-run": run.number, "data-running": run.running ? "true" : "false" },
          el("h3", {}, `Run ${run.number}`, el("span", { class: `badge ${run.running ? "waiting" : "done"}` }, run.running ? "running" : "finished")),
          el(
            "ol",
            { class: "demo-steps" },
            run.steps.map((step) =>
              el(
                "li",
                { class: `demo-step ${step.state}`, "data-testid": "demo-step", "data-step-id": step.id, "data-state": step.state },
                el("div", { class: "step-head" }, el("span", { class: "step-title" }, step.title), el("span", { class: `badge ${step.state}` }, STEP_LABELS[step.state] || step.state)),
                el("div", { class: "step-question" }, step.question),
                decisionNode(step),
                step.answer ? answerNodes(step.answer) : null,
                step.answer ? el("details", { class: "step-json" }, el("summary", {}, "answer JSON"), el("pre", {}, JSON.stringify(step.answer, null, 2))) : null,
                step.error ? el("div", { class: "step-error", "data-testid": "demo-error" }, el("code", {}, step.error.code), " ", step.error.message) : null
              )
            )
          )
        )
      )
    );
  }

  async function startDemo() {
    const button = $("#demo-start");
    button.disabled = true;
    const result = await api("/sandbox/demo", {});
    button.disabled = false;
    if (!result.ok) toast(`The demo did not start (${describe(result)}).`);
    else {
      const channel = S.data && S.data.default_channel;
      if (channel && channel !== S.channel) {
        S.channel = channel;
        render();
      }
    }
  }

  // ---- the composer --------------------------------------------------------------------

  async function send(event) {
    event.preventDefault();
    const box = $("#composer-text");
    const text = box.value;
    if (!text.trim() || !S.channel) return;
    const result = await api("/sandbox/post", { user: S.me, channel: S.channel, text });
    if (result.ok) box.value = "";
    else toast(`The message was not sent (${describe(result)}).`);
  }

  // ---- start ---------------------------------------------------------------------------

  function start() {
    const wanted = new URL(window.location.href).searchParams.get("as");
    let saved = null;
    try {
      saved = localStorage.getItem("sandbox-user");
    } catch (error) {
      /* private mode */
    }
    S.me = wanted || saved || null;
    $("#user-switcher").addEventListener("change", (event) => switchUser(event.target.value));
    $("#demo-start").addEventListener("click", startDemo);
    $("#home-tab").addEventListener("click", openHome);
    $("#composer").addEventListener("submit", send);
    document.addEventListener("click", (event) => {
      // An open multi-select menu closes on a click anywhere else, as in Slack.
      for (const menu of document.querySelectorAll(".sk-multi-details[open]")) {
        if (!menu.contains(event.target)) menu.open = false;
      }
    });
    $("#composer-text").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) send(event);
    });
    refresh();
    connect();
  }

  start();
})();
