// Renders /openapi.json with Swagger UI (docs.html). `validatorUrl: null` keeps the page from
// sending the document to an online validator; every operation's summary is listed.
window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#api-reference',
  validatorUrl: null,
  deepLinking: true,
  docExpansion: 'list',
  defaultModelsExpandDepth: 0,
});
