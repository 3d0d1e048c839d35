// dbq dashboard: live refresh. While the Live switch is on, fetch this very
// page again every few seconds and swap in its #content, so the filters and
// the page cursor (both in the URL) and the scroll position stay put. It
// skips a round while the user types in a form, has changed a form field
// not yet sent, has text selected, or the tab is hidden. Off until switched
// on; each browser remembers the switch. Without this script every page
// works as before, only without refreshing.
(function () {
  "use strict";
  var box = document.getElementById("live");
  var content = document.getElementById("content");
  if (!box || !content) {
    return;
  }
  var toggle = box.querySelector("input");
  var status = box.querySelector(".live-status");
  var every = Math.max(1, parseInt(box.getAttribute("data-every"), 10) || 5) * 1000;
  var key = "dbq.live";
  var timer = null;
  var inFlight = false;

  function say(text) {
    status.textContent = text;
  }

  function remember(on) {
    try {
      window.localStorage.setItem(key, on ? "on" : "off");
    } catch (e) {
      // Storage refused (private mode): the switch lasts for this page.
    }
  }

  function remembered() {
    try {
      return window.localStorage.getItem(key) === "on";
    } catch (e) {
      return false;
    }
  }

  // changed reports whether a form field holds a value the user has not
  // sent yet: a swap would throw it away.
  function changed() {
    var fields = document.querySelectorAll("form input, form select, form textarea");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "hidden" || f.type === "submit") {
        continue;
      }
      if (f.tagName === "SELECT") {
        if (selectChanged(f)) {
          return true;
        }
      } else if (f.type === "checkbox" || f.type === "radio") {
        if (f.checked !== f.defaultChecked) {
          return true;
        }
      } else if (f.value !== f.defaultValue) {
        return true;
      }
    }
    return false;
  }

  function selectChanged(f) {
    var opts = f.options;
    var marked = false;
    var i;
    for (i = 0; i < opts.length; i++) {
      marked = marked || opts[i].defaultSelected;
    }
    for (i = 0; i < opts.length; i++) {
      // A single select with no option marked selected shows its first.
      var want = opts[i].defaultSelected || (!marked && !f.multiple && i === 0);
      if (opts[i].selected !== want) {
        return true;
      }
    }
    return false;
  }

  // busy reports why the user's place would be lost by a swap now, or "".
  function busy() {
    var a = document.activeElement;
    if (a && a.form && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName)) {
      return "paused while you type";
    }
    if (changed()) {
      return "paused: a form has unsent changes";
    }
    var sel = window.getSelection ? window.getSelection() : null;
    if (sel && !sel.isCollapsed && String(sel) !== "") {
      return "paused while text is selected";
    }
    if (document.hidden) {
      return "paused while hidden";
    }
    return "";
  }

  function refresh() {
    var why = busy();
    if (why || inFlight) {
      if (why) {
        say(why);
      }
      return;
    }
    inFlight = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        // A job that completed meanwhile answers 404 with a page saying so.
        if (!r.ok && r.status !== 404) {
          throw new Error("HTTP " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        if (!toggle.checked || busy()) {
          return;
        }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("content");
        if (!fresh) {
          throw new Error("unexpected page");
        }
        var x = window.scrollX;
        var y = window.scrollY;
        var nodes = [];
        while (fresh.firstChild) {
          nodes.push(document.adoptNode(fresh.firstChild));
        }
        content.replaceChildren.apply(content, nodes);
        document.title = doc.title;
        window.scrollTo(x, y);
        say("updated " + new Date().toLocaleTimeString());
      })
      .catch(function (err) {
        say("refresh failed: " + err.message);
      })
      .then(function () {
        inFlight = false;
      });
  }

  function set(on) {
    toggle.checked = on;
    if (timer !== null) {
      window.clearInterval(timer);
      timer = null;
    }
    if (on) {
      timer = window.setInterval(refresh, every);
      say("every " + every / 1000 + "s");
    } else {
      say("");
    }
  }

  toggle.addEventListener("change", function () {
    remember(toggle.checked);
    set(toggle.checked);
  });
  box.hidden = false;
  set(remembered());
})();
