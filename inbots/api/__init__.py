"""The HTTP adapter: routes are thin wrappers over the domain services."""
