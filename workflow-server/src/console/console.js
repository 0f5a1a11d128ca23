// The console's one script. Pages work without it; on a run page it subscribes to the
// run's Server-Sent Events and, when the journal changes, fetches the page again and puts
// its new content in place (status, diagram, steps, actions, journal), as the server
// renders it; the page itself is not reloaded, so where one reads stays.
"use strict";
(function () {
  var live = document.getElementById("live");
  if (!live || !live.dataset.events || !window.EventSource) {
    return;
  }
  var source = new EventSource(live.dataset.events);
  var busy = false;
  var again = null;
  function refresh(seen) {
    var current = document.getElementById("live");
    if (!current || current.dataset.seen === seen) {
      return;
    }
    if (busy) {
      again = seen;
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (answer) { return answer.text(); })
      .then(function (text) {
        var next = new DOMParser().parseFromString(text, "text/html").querySelector("main");
        var now = document.querySelector("main");
        if (next && now) {
          now.replaceWith(next);
        }
      })
      .finally(function () {
        busy = false;
        if (again !== null) {
          var next = again;
          again = null;
          refresh(next);
        }
      });
  }
  source.addEventListener("change", function (event) { refresh(event.data); });
  source.addEventListener("end", function (event) {
    source.close();
    refresh(event.data);
  });
})();
