// Renders /openapi.json with Swagger UI: the Worker's /docs (docs.html here) and the relayer's
// (relayer-daemon/public/docs.html; the relayer embeds this file). `validatorUrl: null` keeps the page from
// sending the document to an online validator; every operation's summary is listed.
window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#api-reference',
  validatorUrl: null,
  deepLinking: true,
  docExpansion: 'list',
  defaultModelsExpandDepth: 0,
});
