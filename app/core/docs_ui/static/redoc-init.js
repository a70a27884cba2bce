// Starts ReDoc in #redoc. A file rather than an inline script, so that the page's Content-Security-Policy
// can allow scripts from this origin only; the document's URL comes from this script element's
// data-openapi-url attribute.
(function () {
  "use strict";
  Redoc.init(document.currentScript.dataset.openapiUrl, {}, document.getElementById("redoc"));
})();
