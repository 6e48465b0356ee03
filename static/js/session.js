// The live session page: htmx's websocket extension with resume-from-last-seq and dedupe.
(function () {
  "use strict";

  function lastSeq() {
    var items = document.querySelectorAll("#log-events > li[data-seq]");
    return items.length ? parseInt(items[items.length - 1].dataset.seq, 10) : 0;
  }

  function nearBottom(box) {
    return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  }

  // Every (re)connect asks for exactly what this page has not rendered yet.
  var createWebSocket = null;
  function install() {
    if (!window.htmx || createWebSocket) return;
    createWebSocket = htmx.createWebSocket || function (url) { return new WebSocket(url); };
    htmx.createWebSocket = function (url) {
      var sep = url.indexOf("?") >= 0 ? "&" : "?";
      var ws = createWebSocket(url + sep + "after=" + lastSeq());
      ws.binaryType = "blob";
      return ws;
    };
  }
  install();
  document.addEventListener("DOMContentLoaded", install);

  var follow = true;
  document.addEventListener("htmx:wsBeforeMessage", function (evt) {
    var box = document.getElementById("log");
    follow = box ? nearBottom(box) : true;
    var seqs = (evt.detail.message.match(/data-seq="(\d+)"/g) || []).map(function (m) {
      return parseInt(m.slice(10, -1), 10);
    });
    var last = lastSeq();
    if (seqs.length && seqs.every(function (s) { return s <= last; })) {
      evt.preventDefault(); // all already shown: a replay overlapping what we had
    }
  });

  document.addEventListener("htmx:wsAfterMessage", function () {
    // Drop any duplicate that slipped in (same seq twice keeps the first).
    var seen = {};
    document.querySelectorAll("#log-events > li[data-seq]").forEach(function (li) {
      if (seen[li.dataset.seq]) li.remove(); else seen[li.dataset.seq] = true;
    });
    var box = document.getElementById("log");
    var jump = document.getElementById("jump-live");
    if (!box) return;
    if (follow) { box.scrollTop = box.scrollHeight; if (jump) jump.hidden = true; }
    else if (jump) { jump.hidden = false; }
  });

  document.addEventListener("htmx:wsClose", function (evt) {
    // Reconnect and resume from our last seq: 4008, we fell behind (at once); 4503, live
    // updates are unavailable for now, and 4500, the stream failed (after a pause).
    var wait = {4008: 200, 4503: 3000, 4500: 3000}[evt.detail.event.code];
    if (wait && evt.detail.socketWrapper) {
      setTimeout(function () { evt.detail.socketWrapper.reconnect(); }, wait);
    }
  });

  // An older page goes in above what the reader sees: keep their place, so the next
  // "Load older events" stays out of sight until they scroll up again (no cascade).
  var olderFromBottom = null;
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var box = document.getElementById("log");
    var elt = evt.detail.elt;
    if (box && elt && elt.classList && elt.classList.contains("older")) {
      olderFromBottom = box.scrollHeight - box.scrollTop;
    }
  });
  document.addEventListener("htmx:afterSwap", function () {
    var box = document.getElementById("log");
    if (box && olderFromBottom !== null) box.scrollTop = box.scrollHeight - olderFromBottom;
    olderFromBottom = null;
  });

  // Panels that arrive over the websocket are rendered once for every viewer, so their forms
  // carry no CSRF field: give a plain POST form this page's token as it is submitted.
  document.addEventListener("submit", function (evt) {
    var form = evt.target;
    if (!form || (form.getAttribute("method") || "").toLowerCase() !== "post") return;
    if (form.querySelector("input[name=csrfmiddlewaretoken]")) return;
    var headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
    if (!headers["X-CSRFToken"]) return;
    var field = document.createElement("input");
    field.type = "hidden";
    field.name = "csrfmiddlewaretoken";
    field.value = headers["X-CSRFToken"];
    form.appendChild(field);
  }, true);

  // -- The diff: its layout (this browser remembers it) and this viewer's "viewed" marks. ------
  // The panel is rendered once for every viewer (and replaced as new diffs stream in), so
  // whatever is one viewer's own is applied here, from the page, after every swap.
  var LAYOUT_KEY = "inspect.diffLayout";
  var viewed = null;

  function csrfToken() {
    return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
  }

  function applyLayout(layout) {
    var section = document.getElementById("diff-section");
    if (!section || (layout !== "unified" && layout !== "split")) return;
    section.dataset.layout = layout;
    section.querySelectorAll(".diff-layout button").forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.dataset.layout === layout));
    });
  }

  function viewedKeys() {
    if (viewed === null) {
      var data = document.getElementById("diff-viewed");
      viewed = new Set(data ? JSON.parse(data.textContent) : []);
    }
    return viewed;
  }

  function showViewed(file, on, collapse) {
    file.classList.toggle("viewed", on);
    var box = file.querySelector(".viewed-box");
    if (box) box.checked = on;
    if (on && collapse) file.open = false;
    var item = document.querySelector('#diff ul.files li[data-key="' + file.dataset.key + '"]');
    if (item) item.classList.toggle("viewed", on);
  }

  function applyViewed() {
    // Once per panel: a file its viewer opened again stays open until the panel is replaced.
    var panel = document.getElementById("diff");
    if (!panel || panel.dataset.viewedApplied) return;
    panel.dataset.viewedApplied = "1";
    var keys = viewedKeys();
    document.querySelectorAll("#diff details.file").forEach(function (file) {
      showViewed(file, keys.has(file.dataset.key), true);
    });
  }

  function status(text) {
    var line = document.getElementById("diff-status");
    if (line) line.textContent = text;
  }

  function markViewed(box) {
    var file = box.closest("details.file");
    var section = document.getElementById("diff-section");
    if (!file || !section) return;
    var on = box.checked;
    showViewed(file, on, true);
    var body = new URLSearchParams({path: box.dataset.path, key: box.dataset.key, viewed: on ? "1" : "0"});
    fetch(section.dataset.viewedUrl, {
      method: "POST", body: body, credentials: "same-origin",
      headers: {"X-CSRFToken": csrfToken(), "Accept": "application/json"},
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (answer) {
        if (!response.ok) throw new Error(answer.error || "the server answered " + response.status);
        if (on) viewedKeys().add(box.dataset.key); else viewedKeys().delete(box.dataset.key);
        status("");
      });
    }).catch(function (error) {
      showViewed(file, !on, false); // nothing was saved: show what is true
      status("Could not save “viewed” for " + box.dataset.path + ": " + error.message);
    });
  }

  document.addEventListener("change", function (evt) {
    if (evt.target && evt.target.classList && evt.target.classList.contains("viewed-box")) {
      markViewed(evt.target);
    }
  });

  // "Show the whole file": a refusal (binary, too large, gone) is shown beside the button,
  // and the diff stays; a success replaces the hunks with the whole file.
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var elt = evt.detail.requestConfig && evt.detail.requestConfig.elt; // detail.elt: the target
    if (!elt || !elt.classList || !elt.classList.contains("whole-file")) return;
    if (evt.detail.xhr.status >= 400) {
      var note = elt.parentNode.querySelector(".whole-file-status");
      if (!note) {
        note = document.createElement("span");
        note.className = "whole-file-status";
        note.setAttribute("role", "status");
        elt.parentNode.appendChild(note);
      }
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
      evt.detail.target = note;
    } else {
      elt.hidden = true;
    }
  });

  document.addEventListener("htmx:wsAfterMessage", applyViewed);
  document.addEventListener("DOMContentLoaded", function () {
    try { applyLayout(localStorage.getItem(LAYOUT_KEY) || "unified"); } catch (e) { /* private mode */ }
    applyViewed();
  });

  document.addEventListener("click", function (evt) {
    var layout = evt.target && evt.target.closest && evt.target.closest(".diff-layout button");
    if (layout) {
      applyLayout(layout.dataset.layout);
      try { localStorage.setItem(LAYOUT_KEY, layout.dataset.layout); } catch (e) { /* private mode */ }
      return;
    }
    if (evt.target && evt.target.id === "jump-live") {
      var box = document.getElementById("log");
      box.scrollTop = box.scrollHeight;
      evt.target.hidden = true;
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("log");
    if (box) box.scrollTop = box.scrollHeight;
    // Scrolled away from the newest event: offer the way back; at the bottom: follow again.
    if (box) box.addEventListener("scroll", function () {
      var jump = document.getElementById("jump-live");
      if (jump) jump.hidden = nearBottom(box);
    });
  });
})();
