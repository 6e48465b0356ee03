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

  document.addEventListener("click", function (evt) {
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
