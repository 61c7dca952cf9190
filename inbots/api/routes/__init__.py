"""One module per resource; each route is a thin call into a service."""
