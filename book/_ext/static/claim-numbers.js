// The popovers of glued claim numbers (book/_ext/claim_numbers.py): CSS shows a popover on hover and focus; this
// script adds a tap (click) that toggles it, Escape that closes it, and keeps it inside the window's width.
(function () {
  "use strict";
  function place(number) {
    var pop = number.querySelector(".claim-popover");
    if (!pop) return;
    pop.style.left = "0px";
    var box = pop.getBoundingClientRect();
    var room = document.documentElement.clientWidth - 8;
    if (box.right > room) pop.style.left = Math.min(0, room - box.right) + "px";
    box = pop.getBoundingClientRect();
    if (box.left < 8) pop.style.left = (parseFloat(pop.style.left) + 8 - box.left) + "px";
  }
  function closeAll(except) {
    document.querySelectorAll(".claim-number.open").forEach(function (n) {
      if (n !== except) { n.classList.remove("open"); }
    });
  }
  function init() {
    document.querySelectorAll(".claim-number").forEach(function (number) {
      number.addEventListener("mouseenter", function () { number.classList.remove("closed"); place(number); });
      number.addEventListener("focusin", function () { number.classList.remove("closed"); place(number); });
      number.addEventListener("click", function (event) {
        if (event.target.closest("a")) return;  // the link inside the popover
        var open = !number.classList.contains("open");
        closeAll(number);
        number.classList.toggle("open", open);
        number.classList.toggle("closed", !open);
        if (open) place(number);
        event.stopPropagation();
      });
      number.addEventListener("keydown", function (event) {
        if (event.key === "Escape") { number.classList.remove("open"); number.classList.add("closed"); }
        if (event.key === "Enter" && event.target === number) { number.click(); }
      });
      number.addEventListener("mouseleave", function () { number.classList.remove("closed"); });
      number.addEventListener("focusout", function (event) {
        if (!number.contains(event.relatedTarget)) number.classList.remove("open", "closed");
      });
    });
    document.addEventListener("click", function () { closeAll(null); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
