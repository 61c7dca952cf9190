"""Database: declarative base, engine set-up, unit of work, migrations."""
