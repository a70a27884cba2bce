// Starts Swagger UI in #swagger-ui. A file rather than an inline script, so that the page's
// Content-Security-Policy can allow scripts from this origin only; the document's URL comes from this
// script element's data-openapi-url attribute.
(function () {
  "use strict";
  var url = document.currentScript.dataset.openapiUrl;
  window.ui = SwaggerUIBundle({
    url: url,
    dom_id: "#swagger-ui",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null, // the default badge asks validator.swagger.io about the document
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
    layout: "BaseLayout",
  });
})();
