"""The web console's page: HTML, CSS and JavaScript of the project's own, served by
``router.adapter.http.console`` (docs/operations.md#the-web-console)."""
