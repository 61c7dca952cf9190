"""When each periodic job last ran, stored where every process can read it."""
