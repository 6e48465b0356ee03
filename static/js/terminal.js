// The session page's terminal: xterm.js over ws/sessions/<id>/terminal/.
// Output arrives as binary frames and goes straight to term.write(): xterm.js interprets escape
// sequences itself and draws text, so nothing the sandbox prints is ever inserted as HTML.
(function () {
  "use strict";

  function say(box, text) {
    box.querySelector(".terminal-state").textContent = text;
  }

  function open(box) {
    var screen = box.querySelector(".terminal-screen");
    var record = box.querySelector(".terminal-record");
    var opener = box.querySelector(".terminal-open");
    box.querySelector(".terminal-box").hidden = false;
    opener.hidden = true;
    screen.textContent = "";
    var term = new window.Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000 });
    var fit = new window.FitAddon.FitAddon();
    term.loadAddon(fit);
    term.open(screen);
    fit.fit();
    var scheme = location.protocol === "https:" ? "wss:" : "ws:";
    var ws = new WebSocket(scheme + "//" + location.host + "/ws/sessions/" + box.dataset.session + "/terminal/");
    ws.binaryType = "arraybuffer";
    var canType = false;

    function sendSize() {
      fit.fit();
      if (canType && ws.readyState === WebSocket.OPEN) {
        ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
      }
    }

    ws.onmessage = function (evt) {
      if (typeof evt.data !== "string") {
        term.write(new Uint8Array(evt.data));
        return;
      }
      var msg = JSON.parse(evt.data);
      if (msg.type === "hello") {
        canType = msg.can_type;
        record.hidden = !canType;
        say(box, canType ? "Connected: what you type runs in the sandbox and is audited."
                         : "Connected read-only: typing needs the engineer role on this repository.");
        sendSize();
        if (canType) term.focus();
      } else if (msg.type === "role") {
        // The role changed while connected (e.g. demoted to reviewer: watch, no typing).
        canType = msg.can_type;
        record.hidden = !canType;
        say(box, msg.message);
      } else if (msg.type === "error") {
        say(box, msg.message);
      } else if (msg.type === "closed") {
        say(box, "Terminal closed: " + msg.reason + ".");
      } else if (msg.type === "recorded") {
        say(box, msg.busy ? "A turn is running; its commit will include your edits."
                 : msg.files ? "Your edits are in the diff (" + msg.files + " file(s) differ from the base)."
                 : "Nothing was changed by hand.");
      }
    };
    ws.onclose = function () {
      canType = false;
      record.hidden = true;
      opener.hidden = false;
      opener.textContent = "Reopen terminal";
      term.options.disableStdin = true;
    };
    term.onData(function (data) {
      if (canType && ws.readyState === WebSocket.OPEN) {
        ws.send(JSON.stringify({ type: "input", data: data }));
      }
    });
    record.onclick = function () {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "commit" }));
    };
    var timer = null;
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(sendSize, 150);
    });
    box.terminal = term; // for tests and the browser console
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest(".terminal-open");
    if (button) open(button.closest(".terminal"));
  });
})();
