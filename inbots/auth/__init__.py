"""Who is calling: bearer tokens resolved to exactly one caller before any handler runs
(``service``), the dashboard's sessions (``sessions``) and its sign-in throttle (``throttle``)."""
